"""AckConsumer: a consumer group in ack mode (RabbitMQ's basic.consume with manual acks, on RocketMQ
queues): every message comes with a receipt and must be acked within the visibility timeout, or it is
handed out again (to this consumer or another of the group) flagged ``redelivered``, with its
``delivery_count`` one higher; after ``ack_max_deliveries`` it goes to ``%DLQ%{group}``.

    with AckConsumer("mqstore-data", group="billing", topic="Orders") as consumer:
        for d in consumer.receive(max_count=32, timeout_ms=1000):
            handle(d.body)
            consumer.ack(d)             # or consumer.nack(d) / consumer.nack(d, requeue=False)

Several AckConsumers of one group share its queues (competing consumers): the owning reader hands
each message to one of them at a time, at most ``prefetch`` unacked per consumer and queue. Each
(group, topic, queue) is served by one reader (``mqstore.ipc.wire.receipts.ack_owner``); the client finds how many
readers the broker runs from reader 0. Like ``Consumer``, each queue has at most one long-polling
pull in flight, and the queues a reader owns are pulled in one request (``mqstore.ipc.client.ack_pulls``);
a reply that lands after ``receive`` returned is kept for the next ``receive``.
``close`` gives back whatever this consumer still holds unacked, so the group need not wait out a
visibility timeout for it (a consumer that dies without closing does make it wait).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import Any

from mqstore.ipc.client.ack_pulls import AckPulls, AckPullShape, AckQueueState, AckSpan
from mqstore.ipc.client.futures import completed, failed
from mqstore.ipc.client.topic_watch import TopicWatch
from mqstore.ipc.client.waiters import Waiter, Waiters, settle
from mqstore.ipc.transport.channel import (
    CLOSED,
    BrokerError,
    BrokerTimeoutError,
    Channel,
    queue_spans,
    resolve_endpoints,
)
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.messages import ReplyError
from mqstore.ipc.wire.receipts import MAX_RECEIPTS, AckStatus, Delivery, Receipt, ack_owner
from mqstore.ipc.wire.replies import ReaderPingReply
from mqstore.ipc.wire.requests import Ack, AckRelease, Nack, Ping

log = logging.getLogger("mqstore.client")
ITERATION_WAIT_MS = 60_000  # an iterating consumer's receives: a close answers one at once



def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def default_consumer_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class AckConsumer:
    def __init__(self, store_dir: str | os.PathLike[str] | None = None, *, group: str, topic: str,
                 queues: list[int] | None = None, consumer_id: str | None = None, prefetch: int | None = None,
                 visibility_ms: int | None = None, tags: str = "*", long_poll_ms: int = 1000,
                 endpoints: Endpoints | None = None, reader_count: int | None = None, timeout_ms: int = 3000,
                 max_per_pull: int = 32) -> None:
        """``prefetch`` (at most the broker's ``ack_prefetch``) and ``visibility_ms`` default to the
        broker's settings; ``reader_count`` to what reader 0 says."""
        if long_poll_ms < 0 or timeout_ms <= 0 or not 1 <= max_per_pull <= 1024:
            raise ValueError("long_poll_ms >= 0, timeout_ms > 0 and 1 <= max_per_pull <= 1024")
        if (prefetch is not None and prefetch < 1) or (visibility_ms is not None and visibility_ms < 1):
            raise ValueError("prefetch and visibility_ms must be positive")
        ep = resolve_endpoints(store_dir, endpoints)
        self.group = group
        self.topic = topic
        self.consumer_id = consumer_id or default_consumer_id()
        self._timeout_ms = timeout_ms
        first = Channel({"reader0": [ep.reader(0)]}, name="mqstore-ack-consumer", curve=ep.curve)
        try:
            if reader_count is None:
                reader_count = ReaderPingReply.decode(first.request("reader0", Ping(), timeout_ms=timeout_ms)).readers
            known = queues if queues is not None else sorted(queue_spans(first, "reader0", topic, timeout_ms))
        finally:
            first.close()
        self._reader_count = reader_count
        self._channel = Channel({f"reader{i}": [ep.reader(i)] for i in range(reader_count)},
                                name="mqstore-ack-consumer", curve=ep.curve)
        # the application's threads and the I/O thread (reply callbacks, timers) both change the queues'
        # state: every change is made holding this lock; futures are completed after letting go of it
        self._lock = threading.RLock()
        self._waiters = Waiters(self._lock, self._channel.call_later)
        self._pulls = AckPulls(self._channel, AckPullShape(group, topic, self.consumer_id, tags, max_per_pull, prefetch,
                                                           visibility_ms, long_poll_ms, timeout_ms))
        self._closed = False
        self._failure: Exception | None = None  # a reply's fault with no receive waiting: the next one raises it
        self._states = {q: AckQueueState(q, self._route(q)) for q in sorted(set(known))}
        self._watch: TopicWatch | None = None
        if queues is None:  # every queue of the topic, those it gets later too
            self._watch = TopicWatch(self._channel, topic, timeout_ms, self._on_queues)
            self._watch.start(self._states)

    def _on_queues(self, spans: dict[int, tuple[int, int]]) -> list[int]:
        """The topic's queues as its watch saw them (the I/O thread): new ones are followed too."""
        with self._lock:
            if not self._closed:
                for q in sorted(set(spans) - set(self._states)):
                    self._states[q] = AckQueueState(q, self._route(q))
                if self._waiters:  # pulled only for a receive: a delivery's visibility timeout starts as it is pulled
                    self._send_pulls()
            return list(self._states)

    def _route(self, queue: int) -> str:
        return f"reader{ack_owner(self.group, self.topic, queue, self._reader_count)}"

    @property
    def queues(self) -> list[int]:
        return list(self._states)

    # -- the application's side ----------------------------------------------------------------------

    def receive(self, max_count: int = 32, timeout_ms: int = 1000) -> list[Delivery]:
        """Deliveries available now, or the first to arrive within ``timeout_ms``; [] when none came.
        Each must be acked (or nacked) within the visibility timeout."""
        return self.receive_async(max_count, timeout_ms).result()

    def receive_async(self, max_count: int = 32, timeout_ms: int = 1000) -> Future[list[Delivery]]:
        """``receive`` without waiting: the future completes (on the client's I/O thread) when
        deliveries come or ``timeout_ms`` runs out. Cancelled before that, it takes nothing: its
        deliveries stay for the next receive (within their visibility timeout)."""
        if max_count < 1:
            raise ValueError("max_count must be at least 1")
        with self._lock:
            if self._closed:
                return failed(BrokerError(CLOSED, "the consumer is closed"))
            if self._failure is not None:
                error, self._failure = self._failure, None
                return failed(error)
            if self._has_buffered():  # waiters are only ever left with nothing buffered
                return completed(self._take(max_count))
            self._send_pulls()  # only when nothing is buffered: a delivery's visibility timeout starts as it is pulled
            if timeout_ms <= 0:
                return completed([])
            future: Future[list[Delivery]] = Future()
            waiter = Waiter(future, lambda: self._take(max_count), [])
            self._waiters.add(waiter, timeout_ms)
            return future

    def ack(self, items: Delivery | Receipt | Iterable[Delivery | Receipt]) -> list[AckStatus]:
        """Ack deliveries (or receipts); one status per item, in order: ``OK``, or ``UNKNOWN_RECEIPT``
        when the broker no longer holds it as delivered (acked already, dead-lettered)."""
        return self.ack_async(items).result()

    def nack(self, items: Delivery | Receipt | Iterable[Delivery | Receipt], *,
             requeue: bool = True) -> list[AckStatus]:
        """Give deliveries back: to be delivered again at once (``requeue``), or to ``%DLQ%{group}``."""
        return self.nack_async(items, requeue=requeue).result()

    def ack_async(self, items: Delivery | Receipt | Iterable[Delivery | Receipt]) -> Future[list[AckStatus]]:
        """``ack`` without waiting: the future holds the statuses."""
        return self._settle(items, None)

    def nack_async(self, items: Delivery | Receipt | Iterable[Delivery | Receipt], *,
                   requeue: bool = True) -> Future[list[AckStatus]]:
        """``nack`` without waiting: the future holds the statuses."""
        return self._settle(items, requeue)

    def close(self) -> None:
        """Leave the group: every delivery not acked yet is handed out again at once (flagged
        redelivered; those received but never returned by ``receive`` not counted as a delivery),
        and the pulls waiting for this consumer are dropped, so nothing new is sent its way."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            done = self._waiters.drain()
            if self._watch is not None:
                self._watch.close()
        settle(done)
        try:
            by_route: dict[str, list[AckQueueState]] = {}
            for state in self._states.values():
                by_route.setdefault(state.route, []).append(state)
            calls = [self._channel.call(route, AckRelease(
                self.group, self.topic, self.consumer_id, tuple(s.queue for s in states),
                tuple((s.queue, seq) for s in states for seq in s.unsettled)[:MAX_RECEIPTS]),
                timeout_ms=self._timeout_ms) for route, states in by_route.items()]
            for call in calls:
                try:
                    call.result()
                except (BrokerError, BrokerTimeoutError) as exc:
                    log.warning("could not give back this consumer's deliveries (%s): they return after the "
                                "visibility timeout", exc)
        finally:
            self._channel.close()

    def __iter__(self) -> Iterator[Delivery]:
        """Each delivery in turn, waiting as long as it takes for the next; ends once the consumer is
        closed (by another thread, or inside the loop). Each is to be acked or nacked as usual."""
        while not self._closed:
            try:
                got = self.receive(1, ITERATION_WAIT_MS)
            except BrokerError:
                if self._closed:
                    return
                raise
            yield from got

    def __enter__(self) -> AckConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------------

    def _settle(self, items: Delivery | Receipt | Iterable[Delivery | Receipt], requeue: bool | None
                ) -> Future[list[AckStatus]]:
        """Ack (``requeue`` None) or nack: one request per owning reader, one future for them all."""
        if isinstance(items, (Delivery, Receipt)):
            items = [items]
        batch = [_receipt(i) for i in items]
        with self._lock:
            for r in batch:
                state = self._states.get(r.queue_id)
                if state is not None and (r.group, r.topic) == (self.group, self.topic):
                    state.unsettled.discard(r.seq)  # settled or refused: either way no longer ours to give back
        by_route: dict[str, list[int]] = {}
        for i, r in enumerate(batch):
            route = f"reader{ack_owner(r.group, r.topic, r.queue_id, self._reader_count)}"
            by_route.setdefault(route, []).append(i)
        outer: Future[list[AckStatus]] = Future()
        results = [AckStatus.BAD_REQUEST] * len(batch)  # every one is overwritten below
        left = [len(by_route)]
        if not by_route:
            outer.set_result([])

        def settled(indices: list[int], call: Future[dict[str, Any]]) -> None:
            try:
                statuses = call.result().get("results")
                if not isinstance(statuses, list) or len(statuses) != len(indices):
                    raise ReplyError(f"expected {len(indices)} settle results, got {statuses!r}")
                for i, status in zip(indices, statuses, strict=True):
                    results[i] = AckStatus.from_wire(status)
            except Exception as exc:
                if not outer.done():
                    outer.set_exception(exc)
                return
            with self._lock:
                left[0] -= 1
                last = left[0] == 0
            if last and not outer.done():
                outer.set_result(results)

        calls = [(self._channel.call(route, _settlement([batch[i].to_wire() for i in indices], requeue),
                                     timeout_ms=self._timeout_ms), indices) for route, indices in by_route.items()]
        for call, indices in calls:
            call.add_done_callback(functools.partial(settled, indices))
        return outer

    def _has_buffered(self) -> bool:
        return any(state.buffered for state in self._states.values())

    def _take(self, max_count: int) -> list[Delivery]:
        taken: list[Delivery] = []
        for state in self._states.values():
            while state.buffered and len(taken) < max_count:
                delivery = state.buffered.popleft()
                state.unsettled.add(delivery.receipt.seq)
                taken.append(delivery)
        return taken

    def _send_pulls(self) -> None:
        """A pull for every queue with none in flight and nothing buffered, one request per reader (the
        caller holds the lock); each reply is taken on the I/O thread (``_pull_done``)."""
        for span, future in self._pulls.send(self._states.values()):
            future.add_done_callback(functools.partial(self._pull_done, span))

    def _pull_done(self, span: AckSpan, future: Future[dict[str, Any]]) -> None:
        """An ack pull's reply (the I/O thread): buffered, handed to the waiters, the next pulls sent."""
        with self._lock:
            if self._closed or span.in_flight is not future:
                return
            try:
                self._pulls.absorb(span, future)
            except Exception as exc:  # the client's own fault, or a malformed reply: the next receive raises
                done = self._waiters.drain(exc)
                if not done:
                    self._failure = exc
            else:
                done = self._waiters.serve(self._has_buffered)
                if span.in_flight is None and span.retry_at_ms > _now_ms():  # refused: again after a back-off
                    self._channel.call_later(span.retry_at_ms - _now_ms(), self._retry_pulls)
                if self._waiters:  # a queue whose deliveries sit unread is not pulled for more
                    self._send_pulls()
        settle(done)

    def _retry_pulls(self) -> None:
        with self._lock:
            if not self._closed:
                self._send_pulls()


def _receipt(item: Delivery | Receipt) -> Receipt:
    if isinstance(item, Delivery):
        return item.receipt
    if isinstance(item, Receipt):
        return item
    raise TypeError(f"expected a Delivery or a Receipt, got {type(item).__name__}")


def _settlement(receipts: list[list[Any]], requeue: bool | None) -> Ack | Nack:
    return Ack(tuple(receipts)) if requeue is None else Nack(tuple(receipts), requeue)
