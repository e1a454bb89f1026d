"""A consumer's pulls, spanning its queues on each reader (as Kafka's fetch spans partitions): one
``pull_queues`` request names every queue of one reader that has none in flight and room in its
prefetch for a whole pull, so at low rates a message costs one reader round, one reply and one
wake-up however many queues the consumer holds there.

The reader answers at once with what any named queue has (each queue's part bounded by the pull's
size, the whole reply by the broker's fetch bounds, shared fairly), else parks the request under
every queue and answers when any of them grows, or at the long poll's end. Each queue's part is
taken as its own pull's answer would be (``QueueState.absorb``); a queue the reply says nothing of
found nothing new. A queue that gets room while its reader's request is in flight (the application
took its buffered messages), or that a seek or a watch added, goes out in a request of its own: no
queue waits for another's long poll, and each queue has at most one pull in flight.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mqstore.ipc.client.queue_state import QueueState
from mqstore.ipc.transport.channel import Channel, pull_reply
from mqstore.ipc.wire.messages import ReplyError
from mqstore.ipc.wire.replies import PullQueuesReply
from mqstore.ipc.wire.requests import PullQueues
from mqstore.ipc.wire.requests.reader import MAX_SPAN_QUEUES

Trace = deque[tuple[int, int, int, int, int, int]]


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True, eq=False)
class Span:
    """One ``pull_queues`` request: the queues it names (each with this request as its ``in_flight``
    until the reply, or a seek, lets go of it) and its own pull bookkeeping (``PullState``)."""

    route: str
    states: list[QueueState]
    in_flight: Future[dict[str, Any]] | None = None
    retry_at_ms: int = 0
    pulled_us: int = 0  # wall clock as it was sent (traced consumers)
    queues: list[int] = field(default_factory=list)


@dataclass(slots=True)
class PullBounds:
    """What one queue's part of a pull may bring, and what a queue may hold (the prefetch)."""

    max_count: int
    max_bytes: int
    prefetch_messages: int
    prefetch_bytes: int

    def has_room(self, state: QueueState) -> bool:
        return (state.buffered_count + self.max_count <= self.prefetch_messages
                and state.buffered_bytes + self.max_bytes <= self.prefetch_bytes)


class SpanPulls:
    def __init__(self, channel: Channel, group: str, topic: str, tags: str, bounds: PullBounds, long_poll_ms: int,
                 timeout_ms: int, trace: Trace | None) -> None:
        self._channel = channel
        self._group = group
        self._topic = topic
        self._tags = tags
        self._bounds = bounds
        self._long_poll_ms = long_poll_ms
        self._timeout_ms = timeout_ms
        self._trace = trace

    def send(self, states: Iterable[QueueState]) -> list[tuple[Span, Future[dict[str, Any]]]]:
        """A request per reader naming its queues with no pull in flight, not backing off, and room
        for a whole pull (the caller holds the consumer's lock, and takes each reply: ``absorb``)."""
        now = _now_ms()
        ready: dict[str, list[QueueState]] = {}
        for state in states:
            if state.in_flight is None and now >= state.retry_at_ms and self._bounds.has_room(state):
                ready.setdefault(state.route, []).append(state)
        sent = []
        for route, waiting in ready.items():
            for first in range(0, len(waiting), MAX_SPAN_QUEUES):
                named = waiting[first:first + MAX_SPAN_QUEUES]
                span = Span(route, named, queues=[s.queue for s in named])
                if self._trace is not None:
                    span.pulled_us = time.time_ns() // 1000
                span.in_flight = future = self._channel.call(route, PullQueues(
                    self._group, self._topic, tuple((s.queue, s.fetch_offset) for s in named), self._bounds.max_count,
                    self._bounds.max_bytes, self._tags, self._long_poll_ms, True if self._trace is not None else None),
                    timeout_ms=self._long_poll_ms + self._timeout_ms)
                for state in named:
                    state.in_flight = future
                sent.append((span, future))
        return sent

    @staticmethod
    def live(span: Span, future: Future[dict[str, Any]]) -> bool:
        """Whether any queue still waits on this request (a seek lets go of its queue's)."""
        return any(state.in_flight is future for state in span.states)

    def absorb(self, span: Span, future: Future[dict[str, Any]]) -> None:
        """The reply (the caller holds the consumer's lock): each queue still waiting on it takes its
        part; a timeout or a refusal lets them go (a refusal after a back-off, ``span.retry_at_ms``);
        a refusal that is the client's fault, or a malformed reply, raises."""
        waiting = {state.queue: state for state in span.states if state.in_flight is future}
        for held in waiting.values():
            held.in_flight = None
        reply = pull_reply(span, future, f"{self._topic}/{span.queues}")
        if reply is None:
            for held in waiting.values():
                held.retry_at_ms = span.retry_at_ms
            return
        try:
            pulled = PullQueuesReply.decode(reply)
            parts = pulled.batches()
        except ReplyError as exc:
            raise ReplyError(f"malformed pull reply: {exc!r}") from None
        for part, batch in parts:
            state = waiting.get(part.queue_id)
            if state is None:
                continue  # seeked meanwhile, or a queue not named (a confused reader): nothing taken
            if self._trace is not None and batch:
                self._trace.append((state.queue, batch.queue_offset(0), batch.queue_offset(-1),
                                    pulled.replied_us or 0, time.time_ns() // 1000, span.pulled_us))
            state.absorb(part.status, part.next_queue_offset, batch)
