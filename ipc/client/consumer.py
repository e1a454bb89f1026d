"""Consumer: pulls a topic's queues in order, sized by bytes, kept in flight, long polling at the end.

A pull asks for up to ``max_bytes_per_pull`` bytes of records (Kafka's max.partition.fetch.bytes;
``max_per_pull`` messages is only a safety bound) and the reader answers with what it has, up to
the broker's ``[broker] fetch_max_bytes`` / ``fetch_max_count``: these are not the RocketMQ caps
(``[store] max_transfer_count``, 32), which stay on the remoting front's pulls. Each assigned queue
has at most one pull in flight, always with ``wait_ms = long_poll_ms``: a reader answers at once
when it has messages and parks the pull otherwise, so an idle consumer never spins. The queues a
reader holds are pulled together, one request naming them all (``mqstore.ipc.client.span_pulls``):
an idle consumer sends one request per reader per long-poll period, and a message costs one reader
round and one reply however many queues the consumer has there.

Prefetch (RocketMQ's pullThresholdForQueue / pullThresholdSizeForQueue, Kafka's fetch pipelining):
a queue's next pull goes out while the application still holds earlier batches, as long as what is
buffered plus what that pull may bring stays within ``prefetch_messages`` and ``prefetch_bytes``
(a single record bigger than the room is still delivered, as Kafka does, so a queue never stalls).
So the reader works, or waits parked, while the application does; its reply is taken by a later
``poll``. What a consumer holds per queue is bounded by the two prefetch limits. Pulls of one queue
always go to the same reader (by a hash of topic and queue), so its parked pulls are in one place.

Construction does not wait: reader 0 is asked for the topic's queues and the group's offsets, and
the first poll (its time counted from their answer) or ``ready()`` raises what prevented it.

Positions: ``position(queue_id)`` is the next offset the application has not been given. ``commit()``
stores positions as the group's offsets (reader 0 owns them); ``auto_commit`` does that every
``auto_commit_interval_ms`` from ``poll`` and on ``close``: what ``poll`` returned is committed by a
later ``poll``, so a crash redelivers at most what was last handed over (at-least-once).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from mqstore.ipc.client.assignment import START_COMMITTED as START_COMMITTED
from mqstore.ipc.client.assignment import START_EARLIEST as START_EARLIEST
from mqstore.ipc.client.assignment import START_LATEST as START_LATEST
from mqstore.ipc.client.assignment import assign
from mqstore.ipc.client.futures import chain, completed, failed, then
from mqstore.ipc.client.queue_state import QueueState, commit_positions, take_from
from mqstore.ipc.client.span_pulls import PullBounds, Span, SpanPulls
from mqstore.ipc.client.topic_watch import TopicWatch
from mqstore.ipc.client.waiters import Waiter, Waiters, settle
from mqstore.ipc.transport.channel import CLOSED, BrokerError, Channel, resolve_endpoints
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import receipts
from mqstore.ipc.wire.messages import MessageBatch, ReceivedMessage
from mqstore.ipc.wire.requests import CommitOffset, Request

log = logging.getLogger("mqstore.client")
T = TypeVar("T")

# Defaults, per queue. A 1 MiB pull (Kafka's max.partition.fetch.bytes) holds ~4,500 records of
# 128-byte bodies: one pull per queue every ~130 ms keeps up with the broker's whole ASYNC rate.
# The prefetch holds four such pulls, the one in flight included (RocketMQ's 100 MiB per queue
# buys nothing but memory here); the counts are safety bounds that small records reach first.
MAX_PER_PULL = 8_192
MAX_BYTES_PER_PULL = 1 << 20
PREFETCH_MESSAGES = 32_768
PREFETCH_BYTES = 4 << 20
MAX_PULL_COUNT_LIMIT = 65_536  # the most messages a consumer may ask one pull for
TRACE_REPLIES = 1_000_000      # pull replies a tracing consumer keeps
ITERATION_WAIT_MS = 60_000     # an iterating consumer's polls: a close answers one at once


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Consumer:
    def __init__(self, store_dir: str | os.PathLike[str] | None = None, *, group: str, topic: str,
                 queues: list[int] | None = None, tags: str = "*", start: str = START_COMMITTED,
                 long_poll_ms: int = 1000, endpoints: Endpoints | None = None, reader_count: int = 1,
                 auto_commit: bool = True, auto_commit_interval_ms: int = 5000, timeout_ms: int = 3000,
                 max_per_pull: int = MAX_PER_PULL, max_bytes_per_pull: int = MAX_BYTES_PER_PULL,
                 prefetch_messages: int = PREFETCH_MESSAGES, prefetch_bytes: int = PREFETCH_BYTES,
                 trace: bool = False) -> None:
        if start not in (START_COMMITTED, START_EARLIEST, START_LATEST):
            raise ValueError(f"start must be {START_COMMITTED!r}, {START_EARLIEST!r} or {START_LATEST!r}")
        if long_poll_ms < 0 or timeout_ms <= 0 or not 1 <= max_per_pull <= MAX_PULL_COUNT_LIMIT:
            raise ValueError(f"long_poll_ms >= 0, timeout_ms > 0 and 1 <= max_per_pull <= {MAX_PULL_COUNT_LIMIT}")
        if min(max_bytes_per_pull, prefetch_messages, prefetch_bytes) < 1:
            raise ValueError("max_bytes_per_pull, prefetch_messages and prefetch_bytes must be positive")
        ep = resolve_endpoints(store_dir, endpoints, reader_count)
        self.group = group
        self.topic = topic
        self._queues = queues
        self.tags = tags
        self._long_poll_ms = long_poll_ms
        self._timeout_ms = timeout_ms
        # a pull never asks for more than the prefetch could hold
        self._max_per_pull = min(max_per_pull, prefetch_messages)
        self._max_bytes_per_pull = min(max_bytes_per_pull, prefetch_bytes)
        self._prefetch_messages = prefetch_messages
        self._prefetch_bytes = prefetch_bytes
        # with trace, each pull reply that brought messages: (queue, first and last queue offset, the
        # reader's wall clock as it answered, this process's as the reply was taken, this process's as
        # the pull was sent), microseconds
        self.pull_trace: deque[tuple[int, int, int, int, int, int]] | None = (
            deque(maxlen=TRACE_REPLIES) if trace else None)
        self._auto_commit = auto_commit
        self._auto_commit_interval_ms = auto_commit_interval_ms
        self._next_auto_commit_ms = _now_ms() + auto_commit_interval_ms
        self._reader_count = ep.reader_count
        # the application's threads and the I/O thread (reply callbacks, timers) both change the queues'
        # state: every change is made holding this lock; futures are completed after letting go of it
        self._lock = threading.RLock()
        self._closed = False
        self._failure: Exception | None = None  # a reply's fault with no poll waiting: the next poll raises it
        self._channel = Channel({f"reader{i}": [ep.reader(i)] for i in range(ep.reader_count)},
                                name="mqstore-consumer", curve=ep.curve)
        self._waiters = Waiters(self._lock, self._channel.call_later)
        self._pulls = SpanPulls(self._channel, group, topic, tags, PullBounds(
            self._max_per_pull, self._max_bytes_per_pull, prefetch_messages, prefetch_bytes), long_poll_ms, timeout_ms,
            self.pull_trace)
        self._watch: TopicWatch | None = None
        self._states: dict[int, QueueState] = {}
        # done once the queues and where to start on each are known (``_assign``): until then a poll
        # waits and sends nothing; its error (no broker, a refusal) is every later poll's
        self._assigned: Future[None] = Future()
        self._assignment_ended: Future[None] = Future()  # done either way: commits wait for this
        try:
            assign(lambda request: self._call("reader0", request), group, topic, queues, start
                   ).add_done_callback(self._assigned_came)
        except BaseException:
            self._channel.close()
            raise

    def _call(self, route: str, request: Request) -> Future[dict[str, Any]]:
        return self._channel.call(route, request, timeout_ms=self._timeout_ms)

    def _assigned_came(self, assigned: Future[dict[int, tuple[int, int]]]) -> None:
        """The assignment (the I/O thread): the queues set up and pulled, or its error to the polls waiting."""
        try:
            firsts = assigned.result()
        except BaseException as exc:
            self._assigned.set_exception(exc)  # every later poll's error
            with self._lock:
                done = self._waiters.drain(exc)
            settle(done)
            self._assignment_ended.set_result(None)  # no queues: nothing to commit
            return
        with self._lock:
            for q, (first, committed) in firsts.items():
                self._states[q] = QueueState(q, self._route_for(q), first, first, committed)
            if not self._closed:
                if self._queues is None:  # every queue of the topic, those it gets later too
                    self._watch = TopicWatch(self._channel, self.topic, self._timeout_ms, self._on_queues)
                    self._watch.start(self._states)
                self._waiters.arm_all()
                self._send_pulls()
        self._assigned.set_result(None)
        self._assignment_ended.set_result(None)

    def _wait_assigned(self) -> None:
        """Wait for the assignment on the calling thread (an I/O thread's callback would wait forever)."""
        if not self._assigned.done() and self._channel.on_io_thread():
            raise RuntimeError("a consumer's callbacks cannot wait for its assignment")
        self._assigned.result()

    def _on_queues(self, spans: dict[int, tuple[int, int]]) -> list[int]:
        """The topic's queues as its watch saw them (the I/O thread): a queue that appeared since this
        consumer started is read from its first offset, since all of it came after."""
        with self._lock:
            if not self._closed:
                for q in sorted(set(spans) - set(self._states)):
                    first = spans[q][0]
                    self._states[q] = QueueState(q, self._route_for(q), first, first, -1)
                self._send_pulls()
            return list(self._states)

    def _route_for(self, queue: int) -> str:
        # the same spreading as ack-mode ownership: a topic's queues go round the readers
        return f"reader{receipts.ack_owner('', self.topic, queue, self._reader_count)}"

    # -- the application's side ----------------------------------------------------------------------

    @property
    def queues(self) -> list[int]:
        self._wait_assigned()
        with self._lock:
            return list(self._states)

    def ready(self) -> None:
        """Wait until the consumer knows its queues and where it starts on each (one round trip to
        reader 0, which the constructor only starts; the first poll waits for it too). Raises what
        prevented it: BrokerTimeoutError when no broker answers, BrokerError when one refuses."""
        self.ready_async().result()

    def ready_async(self) -> Future[None]:
        """``ready`` without waiting."""
        return then(self._assigned, lambda _: None)

    def position(self, queue_id: int) -> int:
        self._wait_assigned()
        with self._lock:
            return self._state(queue_id).position

    def seek(self, queue_id: int, queue_offset: int) -> None:
        """Deliver queue ``queue_id`` from ``queue_offset`` on; a pull in flight for it is abandoned."""
        if queue_offset < 0:
            raise ValueError(f"queue_offset must not be negative, got {queue_offset}")
        self._wait_assigned()
        with self._lock:
            state = self._state(queue_id)
            state.clear()
            state.position = state.fetch_offset = queue_offset
            state.in_flight = None
            state.retry_at_ms = 0

    def poll(self, timeout_ms: int = 1000, max_count: int | None = None) -> list[ReceivedMessage]:
        """Messages available now, or the first to arrive within ``timeout_ms``; in queue-offset order
        within each queue. An empty list when nothing came."""
        return self.poll_async(timeout_ms, max_count).result()

    def poll_batch(self, timeout_ms: int = 1000, max_count: int | None = None) -> MessageBatch:
        """``poll`` as the readers answered it: a sequence whose messages are decoded when touched
        (``bodies()`` reads only the bodies). Empty when nothing came."""
        return self.poll_batch_async(timeout_ms, max_count).result()

    def poll_async(self, timeout_ms: int = 1000, max_count: int | None = None) -> Future[list[ReceivedMessage]]:
        """``poll`` without waiting: the future completes (on the client's I/O thread) when messages
        come or ``timeout_ms`` runs out. Cancelled before that, it takes nothing: its messages stay
        for the next poll (and auto_commit never commits past what a completed poll handed over)."""
        return self._poll(timeout_ms, max_count, list)

    def poll_batch_async(self, timeout_ms: int = 1000, max_count: int | None = None) -> Future[MessageBatch]:
        """``poll_batch`` without waiting, as ``poll_async``."""
        return self._poll(timeout_ms, max_count, lambda batch: batch)

    def _poll(self, timeout_ms: int, max_count: int | None, convert: Callable[[MessageBatch], T]) -> Future[T]:
        with self._lock:
            if self._closed:
                return failed(BrokerError(CLOSED, "the consumer is closed"))
            if self._failure is not None:
                error, self._failure = self._failure, None
                return failed(error)
            unassigned = self._assigned.exception() if self._assigned.done() else None
            if unassigned is not None:
                return failed(unassigned)
            if self._auto_commit and _now_ms() >= self._next_auto_commit_ms:
                self._commit_async().add_done_callback(_log_commit_failure)
            future: Future[T]
            if self._has_buffered():  # waiters are only ever left with nothing buffered
                future = completed(convert(take_from(self._states.values(), max_count)))
            elif timeout_ms <= 0 and self._assigned.done():
                future = completed(convert(MessageBatch.empty()))
            else:  # before the queues are known, its time starts once they are
                future = Future()
                waiter = Waiter(future, lambda: convert(take_from(self._states.values(), max_count)),
                                convert(MessageBatch.empty()))
                self._waiters.add(waiter, timeout_ms, armed=self._assigned.done())
            self._send_pulls()
            return future

    def buffered(self, queue_id: int) -> tuple[int, int]:
        """Messages and bytes pulled for queue ``queue_id`` and not handed over yet: within the prefetch bounds."""
        self._wait_assigned()
        with self._lock:
            state = self._state(queue_id)
            return state.buffered_count, state.buffered_bytes

    def messages(self, max_count: int, timeout_ms: int = 1000) -> list[ReceivedMessage]:
        """Up to ``max_count`` messages, waiting at most ``timeout_ms`` in all."""
        deadline_ms = _now_ms() + timeout_ms
        out: list[ReceivedMessage] = []
        while len(out) < max_count:
            remaining = deadline_ms - _now_ms()
            got = self.poll(max(0, remaining), max_count - len(out))
            out.extend(got)
            if not got and remaining <= 0:
                break
        return out

    def commit(self) -> None:
        """Store every queue's position as the group's offset (reader 0); none if it never got its queues."""
        self._commit_async().result()

    def commit_async(self) -> Future[None]:
        """``commit`` without waiting: the future is done once reader 0 has stored every position."""
        return self._commit_async()

    def _commit_async(self) -> Future[None]:
        with self._lock:
            self._next_auto_commit_ms = _now_ms() + self._auto_commit_interval_ms

        def commit() -> Future[None]:  # once the queues are known
            with self._lock:
                states = list(self._states.values())
            return commit_positions(self._lock, states, lambda s: self._call(
                "reader0", CommitOffset(self.group, self.topic, s.queue, s.position)))
        return chain(self._assignment_ended, commit)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            done = self._waiters.drain()
            if self._watch is not None:
                self._watch.close()
        settle(done)
        try:
            if self._auto_commit:
                self.commit()
        finally:
            self._channel.close()

    def __iter__(self) -> Iterator[ReceivedMessage]:
        """Each message in turn, waiting as long as it takes for the next; ends once the consumer is
        closed (by another thread, or inside the loop). One message is handed over at a time, so a
        close in the loop commits nothing the loop has not had."""
        while not self._closed:
            try:
                got = self.poll(ITERATION_WAIT_MS, 1)
            except BrokerError:
                if self._closed:
                    return
                raise
            yield from got

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------------

    def _state(self, queue: int) -> QueueState:
        try:
            return self._states[queue]
        except KeyError:
            raise ValueError(f"queue {queue} is not assigned to this consumer") from None

    def _has_buffered(self) -> bool:
        return any(state.buffered for state in self._states.values())

    def _send_pulls(self) -> None:
        """A pull for every queue with none in flight whose buffer has room for a whole one, one request
        per reader (the caller holds the lock); each reply is taken on the I/O thread (``_pull_done``)."""
        for span, future in self._pulls.send(self._states.values()):
            future.add_done_callback(functools.partial(self._pull_done, span))

    def _pull_done(self, span: Span, future: Future[dict[str, Any]]) -> None:
        """A pull's reply (the I/O thread): buffered, handed to the waiters, the next pulls sent."""
        with self._lock:
            if self._closed or not self._pulls.live(span, future):
                return  # closing, or every queue of it abandoned by a seek
            try:
                self._pulls.absorb(span, future)
            except Exception as exc:  # the client's own fault, or a malformed reply: the next poll raises
                done = self._waiters.drain(exc)
                if not done:
                    self._failure = exc
            else:
                done = self._waiters.serve(self._has_buffered)
                if span.in_flight is None and span.retry_at_ms > _now_ms():  # refused: again after a back-off
                    self._channel.call_later(span.retry_at_ms - _now_ms(), self._retry_pulls)
                self._send_pulls()
        settle(done)

    def _retry_pulls(self) -> None:
        with self._lock:
            if not self._closed:
                self._send_pulls()


def _log_commit_failure(future: Future[None]) -> None:
    error = future.exception()
    if error is not None:  # the positions stay uncommitted: the next auto commit tries again
        log.warning("auto commit failed: %s", error)
