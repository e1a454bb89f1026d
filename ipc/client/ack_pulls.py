"""An ack-mode consumer's pulls, spanning its queues on each reader (as Kafka's fetch spans
partitions): one ``ack_pull_queues`` request names every queue the reader owns for the group that has
no pull in flight and nothing buffered, so at low rates a delivery costs one reader round, one reply
and one wake-up however many queues the consumer holds there.

The reader answers at once with what any named queue hands out (each delivery says its queue), else
parks the request under every queue and answers when any of them has something, or empty at the
long poll's end. A queue that becomes eligible while its reader's request is in flight goes out in a
request of its own: each queue has at most one pull in flight.

A reader that answers UNKNOWN_OP (a broker older than the client) is asked with one ``ack_pull`` per
queue from then on (``per_queue``, remembered per route).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mqstore.ipc.client.span_pulls import unknown_op
from mqstore.ipc.transport.channel import Channel, pull_reply
from mqstore.ipc.wire.messages import ReplyError
from mqstore.ipc.wire.receipts import Delivery
from mqstore.ipc.wire.requests import AckPull, AckPullQueues
from mqstore.ipc.wire.requests.acks import MAX_SPAN_QUEUES


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True)
class AckQueueState:
    queue: int
    route: str
    buffered: deque[Delivery] = field(default_factory=deque)
    unsettled: set[int] = field(default_factory=set)  # seqs handed to the application, not settled yet
    in_flight: Future[dict[str, Any]] | None = None
    retry_at_ms: int = 0


@dataclass(slots=True, eq=False)
class AckSpan:
    """One request: an ``ack_pull_queues`` (or, ``single``, an ``ack_pull``) and the queues it names."""

    route: str
    states: list[AckQueueState]
    single: bool = False
    in_flight: Future[dict[str, Any]] | None = None
    retry_at_ms: int = 0


@dataclass(frozen=True, slots=True)
class AckPullShape:
    """What every pull of one consumer asks the same way."""

    group: str
    topic: str
    consumer_id: str
    tags: str
    max_per_pull: int
    prefetch: int | None
    visibility_ms: int | None
    long_poll_ms: int
    timeout_ms: int


class AckPulls:
    def __init__(self, channel: Channel, shape: AckPullShape) -> None:
        self._channel = channel
        self._shape = shape
        self.per_queue: set[str] = set()  # routes that refused ack_pull_queues: one ack_pull per queue there

    def send(self, states: Iterable[AckQueueState]) -> list[tuple[AckSpan, Future[dict[str, Any]]]]:
        """A request per reader naming its queues with no pull in flight, nothing buffered and not
        backing off (the caller holds the consumer's lock, and takes each reply: ``absorb``)."""
        now = _now_ms()
        ready: dict[str, list[AckQueueState]] = {}
        for state in states:
            if state.in_flight is None and not state.buffered and now >= state.retry_at_ms:
                ready.setdefault(state.route, []).append(state)
        p = self._shape
        sent = []
        for route, waiting in ready.items():
            single = route in self.per_queue
            step = 1 if single else MAX_SPAN_QUEUES
            for first in range(0, len(waiting), step):
                named = waiting[first:first + step]
                request = (AckPull(p.group, p.topic, named[0].queue, p.consumer_id, p.long_poll_ms, p.tags,
                                   p.max_per_pull, p.prefetch, p.visibility_ms) if single else
                           AckPullQueues(p.group, p.topic, tuple(s.queue for s in named), p.consumer_id,
                                         p.long_poll_ms, p.tags, p.max_per_pull, p.prefetch, p.visibility_ms))
                span = AckSpan(route, named, single)
                span.in_flight = future = self._channel.call(route, request,
                                                             timeout_ms=p.long_poll_ms + p.timeout_ms)
                for state in named:
                    state.in_flight = future
                sent.append((span, future))
        return sent

    def absorb(self, span: AckSpan, future: Future[dict[str, Any]]) -> None:
        """The reply (the caller holds the consumer's lock): each delivery buffered on its queue; a
        timeout or a refusal lets the queues go (a refusal after a back-off); a refusal that is the
        client's fault, or a malformed reply, raises."""
        by_queue = {state.queue: state for state in span.states}
        for state in span.states:
            state.in_flight = None
        if not span.single and unknown_op(future):  # an older reader: its queues pulled one by one, at once
            self.per_queue.add(span.route)
            span.in_flight = None
            return
        what = f"ack {self._shape.topic}/{[s.queue for s in span.states]}"
        reply = pull_reply(span, future, what)
        if reply is None:
            for state in span.states:
                state.retry_at_ms = span.retry_at_ms
            return
        try:
            deliveries = [Delivery.from_ack_wire(self._shape.group, m) for m in reply["msgs"]]
        except (KeyError, TypeError, ValueError, ReplyError) as exc:
            raise ReplyError(f"malformed ack pull reply: {exc!r}") from None
        stray = [d.receipt.queue_id for d in deliveries if d.receipt.queue_id not in by_queue]
        for delivery in deliveries:
            if delivery.receipt.queue_id in by_queue:
                by_queue[delivery.receipt.queue_id].buffered.append(delivery)
        if stray:  # a confused reader: those come back after their visibility timeout
            raise ReplyError(f"malformed ack pull reply: deliveries of queues {sorted(set(stray))}, not of "
                             f"{sorted(by_queue)}")
