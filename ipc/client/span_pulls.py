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

A reader that answers the spanning request UNKNOWN_OP (a broker older than the client) is asked
with one pull per queue from then on, as clients asked before (``per_queue``, remembered per route).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mqstore.ipc.client.queue_state import QueueState
from mqstore.ipc.transport.channel import BrokerError, Channel, pull_reply
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.messages import ReplyError
from mqstore.ipc.wire.replies import PackedPullReply, PullQueuesReply
from mqstore.ipc.wire.requests import Pull, PullQueues
from mqstore.ipc.wire.requests.reader import MAX_SPAN_QUEUES

Trace = deque[tuple[int, int, int, int, int, int]]


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def unknown_op(future: Future[dict[str, Any]]) -> bool:
    """Whether a completed request was refused as an op the broker does not know (an older one)."""
    error = future.exception()
    return isinstance(error, BrokerError) and error.status == schema.UNKNOWN_OP


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
    single: bool = False  # a plain ``pull`` of one queue (a reader that knows no ``pull_queues``)


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
        self.per_queue: set[str] = set()  # routes that refused pull_queues: one pull per queue there

    def send(self, states: Iterable[QueueState]) -> list[tuple[Span, Future[dict[str, Any]]]]:
        """A request per reader naming its queues with no pull in flight, not backing off, and room
        for a whole pull (the caller holds the consumer's lock, and takes each reply: ``absorb``)."""
        now = _now_ms()
        ready: dict[str, list[QueueState]] = {}
        for state in states:
            if state.in_flight is None and now >= state.retry_at_ms and self._bounds.has_room(state):
                ready.setdefault(state.route, []).append(state)
        sent = []
        traced = True if self._trace is not None else None
        for route, waiting in ready.items():
            single = route in self.per_queue
            step = 1 if single else MAX_SPAN_QUEUES
            for first in range(0, len(waiting), step):
                named = waiting[first:first + step]
                span = Span(route, named, queues=[s.queue for s in named], single=single)
                if self._trace is not None:
                    span.pulled_us = time.time_ns() // 1000
                bounds = self._bounds
                request = (Pull(self._group, self._topic, named[0].queue, named[0].fetch_offset, bounds.max_count,
                                bounds.max_bytes, True, self._tags, self._long_poll_ms, True, traced) if single else
                           PullQueues(self._group, self._topic, tuple((s.queue, s.fetch_offset) for s in named),
                                      bounds.max_count, bounds.max_bytes, self._tags, self._long_poll_ms, traced))
                span.in_flight = future = self._channel.call(route, request,
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
        if not span.single and unknown_op(future):  # an older reader: its queues pulled one by one, at once
            self.per_queue.add(span.route)
            span.in_flight = None
            return
        reply = pull_reply(span, future, f"{self._topic}/{span.queues}")
        if reply is None:
            for held in waiting.values():
                held.retry_at_ms = span.retry_at_ms
            return
        try:
            if span.single:
                one = PackedPullReply.decode(reply)
                parts = [(span.queues[0], one.status, one.next_queue_offset, one.batch())]
                replied_us = one.replied_us
            else:
                pulled = PullQueuesReply.decode(reply)
                parts = [(p.queue_id, p.status, p.next_queue_offset, batch) for p, batch in pulled.batches()]
                replied_us = pulled.replied_us
        except ReplyError as exc:
            raise ReplyError(f"malformed pull reply: {exc!r}") from None
        for queue_id, status, next_queue_offset, batch in parts:
            state = waiting.get(queue_id)
            if state is None:
                continue  # seeked meanwhile, or a queue not named (a confused reader): nothing taken
            if self._trace is not None and batch:
                self._trace.append((state.queue, batch.queue_offset(0), batch.queue_offset(-1),
                                    replied_us or 0, time.time_ns() // 1000, span.pulled_us))
            state.absorb(status, next_queue_offset, batch)
