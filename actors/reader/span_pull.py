"""Spanning pulls (``pull_queues``): one request for several queues of a topic, as Kafka's fetch spans
partitions, so that a consumer's queues on one reader cost one round, one reply and one wake-up.

Each named (queue, offset) is read as a pull would read it (from the queue's purge floor when the
offset is below it; the tag filter; records packed), and the request is answered at once when any
queue has something to say: messages, or a status that moves the consumer (an offset too small or
past the end, everything scanned filtered out). Otherwise it waits parked under every queue it names
(``mqstore.actors.reader.long_poll``) and is answered when any of them grows, or at ``wait_ms``.

The reply's bounds are shared fairly: each queue's part is at most the request's ``max`` and
``max_bytes``, and the whole reply at most [broker] fetch_max_count / fetch_max_bytes, each queue in
turn getting an equal share of what is left; the queue read first turns with every request, so a
queue with a deep backlog never starves the others, within one reply or across them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.config import BrokerSection
from mqstore.actors.meters import Deliveries, Latencies
from mqstore.actors.reader.fields import SYSTEM_ERROR
from mqstore.actors.reader.long_poll import RECHECK_PARKED_MS, ParkedPulls, ParkedSpan, SpanRequest, is_waitable
from mqstore.actors.reader.packed import packed
from mqstore.actors.reader.state import PublishedStore
from mqstore.engine.read.lookup import GetResult, GetStatus, PullLimits, StoredRecords, TagFilter
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.replies import PulledQueue, PullQueuesReply

log = logging.getLogger("mqstore")

TOPIC_NOT_EXIST = "TOPIC_NOT_EXIST"  # as a plain pull of a deleted topic is answered
_NOTHING_YET = frozenset({GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE,
                          GetStatus.NO_MATCHED_LOGIC_QUEUE})

Results = list[tuple[int, GetResult]]


class SpanPulls:
    def __init__(self, store: PublishedStore, parked: ParkedPulls, floor: Callable[[str, int], int],
                 broker: BrokerSection, delivered: Deliveries, latency: Latencies) -> None:
        """``floor``: a queue's purge floor (``QueuePurges.floor``); ``broker``: the whole reply's bounds
        (fetch_max_count, fetch_max_bytes) and the longest wait."""
        self.store = store
        self.parked = parked
        self.floor = floor
        self.max_count, self.max_bytes = broker.fetch_max_count, broker.fetch_max_bytes
        self.long_poll_max_ms = broker.long_poll_max_ms
        self.delivered = delivered
        self.latency = latency
        self.requests = 0  # pull_queues requests served
        self._turn = 0     # which named queue is read first: one further on every read

    def op_pull_queues(self, identity: bytes, request_id: Any, request: requests.PullQueues) -> dict[str, Any] | None:
        started = time.perf_counter()
        requests.at_most("wait_ms", request.wait_ms, self.long_poll_max_ms)
        self.requests += 1
        span = SpanRequest(
            group=request.group or "", topic=request.topic,
            queues=tuple((q, max(queue_offset, self.floor(request.topic, q))) for q, queue_offset in request.queues),
            limits=PullLimits(request.max_count or self.max_count, request.max_bytes or self.max_bytes,
                              self.max_count, self.max_bytes),
            tag_filter=TagFilter.parse(request.tags if request.tags is not None else "*"), trace=bool(request.trace))
        results = self._read(span)
        if all(is_waitable(r) for _, r in results):
            # a dropped notice must not make a consumer wait: look at the files before waiting
            grew = {q for q, _ in results if self.store.recheck(span.topic, q)}
            if grew:
                results = self._read(span)
            elif any(self.store.deleted(span.topic, q) for q, _ in results):
                return schema.error_reply(request_id, TOPIC_NOT_EXIST, f"topic {span.topic!r} was deleted")
        if (request.wait_ms or 0) > 0 and all(is_waitable(r) for _, r in results) and not self.parked.full:
            now = monotonic_ms()
            self.parked.park(ParkedSpan(identity, request_id, span, now + (request.wait_ms or 0)).after(results),
                             now, RECHECK_PARKED_MS)
            return None
        reply = self._reply(request_id, span, results)
        self.latency.observe(time.perf_counter() - started)
        return reply

    def wake(self, parked: ParkedSpan) -> dict[str, Any] | None:
        """A parked span one of whose queues grew: its reply, or None when it waits on (parked again).
        A fault is the client's to hear of (SYSTEM_ERROR), never the reader's loop's."""
        try:
            results = self._read(parked.span)
        except Exception as exc:
            log.exception("parked pull_queues failed")
            return schema.error_reply(parked.request_id, SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if all(is_waitable(r) for _, r in results):
            self.parked.park(parked.after(results), monotonic_ms(), RECHECK_PARKED_MS)
            return None
        return self._reply(parked.request_id, parked.span, results)

    def answer(self, parked: ParkedSpan) -> dict[str, Any]:
        """A parked span's reply with what its queues hold now (its deadline, or the reader stopping)."""
        return self._reply(parked.request_id, parked.span, self._read(parked.span))

    def _read(self, span: SpanRequest) -> Results:
        """Each queue read in turn, from this read's first, within its share of what the reply has left;
        a queue not read (the reply full) says nothing this time."""
        n = len(span.queues)
        first = self._turn % n
        self._turn += 1
        left_count, left_bytes = self.max_count, self.max_bytes
        per = span.limits
        results: Results = []
        for i, (queue_id, queue_offset) in enumerate(span.queues[first:] + span.queues[:first]):
            if left_count <= 0 or left_bytes <= 0:
                break
            count = min(per.max_count, max(1, left_count // (n - i)))
            size = min(per.max_bytes, max(1, left_bytes // (n - i)))
            result = self.store.pull(span.topic, queue_id, queue_offset, PullLimits(count, size, count, size),
                                     span.tag_filter, stored=True)
            left_count -= result.message_count
            left_bytes -= result.total_bytes
            results.append((queue_id, result))
        return results

    def _reply(self, request_id: Any, span: SpanRequest, results: Results) -> dict[str, Any]:
        """Every queue with something to say; every queue read, when none has."""
        said = [(q, r) for q, r in results if r.message_count or r.status not in _NOTHING_YET] or results
        stored = [r.stored for _, r in said if r.stored is not None and r.stored.sizes]
        records = StoredRecords(b"".join(s.data for s in stored), [o for s in stored for o in s.queue_offsets],
                                [o for s in stored for o in s.phys_offsets], [n for s in stored for n in s.sizes])
        if records.sizes:
            self.delivered.add(span.group, span.topic, len(records), len(records.data))
        rows = [PulledQueue(q, r.status.value, r.next_queue_offset, r.min_queue_offset, r.max_queue_offset,
                            r.message_count) for q, r in said]
        return PullQueuesReply(rows, *packed(records), time.time_ns() // 1000 if span.trace else None
                               ).encode(request_id)
