"""Spanning ack pulls (``ack_pull_queues``): one request for several queues of one group and topic on
this reader, as Kafka's fetch spans partitions, so that an ack-mode consumer's queues on a reader cost
one round, one reply and one wake-up.

Each named queue is served as its own ``ack_pull`` would be (``AckGroups.serve``: the queue index's
publish and deliver records, redelivery flags, dead letters, the consumer's ``prefetch`` per queue),
and the request is answered at once with whatever any queue hands out. A queue whose state in memory
says it has nothing (nothing ready or due again, no visibility deadline past, nothing published past
what its index has looked at) is not served: at low rates a request names every queue and one has
news. Its files are read again for a new request at most every ``RECHECK_PARKED_MS`` (a dropped
``arrived`` notice delays a delivery no longer than the parked pulls' own recheck lets it).

A request that gets nothing waits parked under every queue it names
(``mqstore.actors.reader.long_poll.ParkedAckPulls``) and is answered when
any of them has something (an ``arrived`` notice, a nack, an ack that makes room, a visibility
timeout), or empty at ``wait_ms``.

The bounds are shared as a ``pull_queues``' are: each queue's part is at most the request's ``max``,
the whole reply at most [broker] fetch_max_count messages, each queue in turn getting an equal share
of what is left, and no queue is served once the reply holds fetch_max_bytes; the queue served first
turns with every request, so a queue with a deep backlog never starves the others.

Every queue named must be this reader's (else NOT_OWNER, as an ``ack_pull``), and a request that
would open more indexes than [broker] ack_max_queues allows is refused SERVICE_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mqstore.actors.reader.ack_requests import AckKey, AckSpan, resolve_ack_span
from mqstore.actors.reader.long_poll import RECHECK_PARKED_MS, ParkedAckSpan
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.replies import AckPullReply

if TYPE_CHECKING:
    from mqstore.actors.reader.ack_groups import AckGroups


class AckSpans:
    def __init__(self, groups: AckGroups) -> None:
        self.groups = groups
        self.max_count, self.max_bytes = groups.cfg.fetch_max_count, groups.cfg.fetch_max_bytes
        self.requests = 0  # ack_pull_queues requests served
        self._turn = 0     # which named queue is served first: one further on every serve
        self._looked_ms: dict[AckKey, int] = {}  # when each queue's files were last read for a new request

    def op_ack_pull_queues(self, identity: bytes, request_id: Any, request: requests.AckPullQueues
                           ) -> dict[str, Any] | None:
        groups = self.groups
        span, wait_ms = resolve_ack_span(request, groups.cfg)
        for key in span.keys:
            refused = groups.not_owner(request_id, key)
            if refused is not None:
                return refused
        opening = sum(1 for key in span.keys if groups.queues.opened(key) is None)
        if opening and len(groups.queues) + opening > groups.cfg.ack_max_queues:
            return schema.error_reply(request_id, schema.SERVICE_NOT_AVAILABLE, (
                f"reader {groups.reader_index} serves {len(groups.queues)} ack-mode queues and would open {opening} "
                f"more, past its [broker] ack_max_queues"))
        self.requests += 1
        now = groups.now_ms()
        msgs = self.serve(span, now, recheck=True)
        if not msgs and wait_ms > 0 and not groups.parked.full:
            groups.parked.park(ParkedAckSpan(identity, request_id, span, now + wait_ms))
            return None
        return AckPullReply(msgs).encode(request_id)

    def serve_woken(self, span: AckSpan, queue_id: int, now: int) -> list[dict[str, Any]]:
        """A parked span woken by one of its queues: that queue served alone (the others had nothing
        when it parked, and any of them that gets something wakes it in turn), so a wake costs one
        queue's serve however many the span names."""
        return self.groups.serve(span.pull(queue_id, min(span.max_count, self.max_count)), now)

    def serve(self, span: AckSpan, now: int, *, recheck: bool = False) -> list[dict[str, Any]]:
        """Each queue served in turn, from this serve's first, within its share of what the reply has
        left; the deliveries, one queue's after another."""
        n = len(span.queue_ids)
        first = self._turn % n
        self._turn += 1
        left_count, left_bytes = self.max_count, self.max_bytes
        msgs: list[dict[str, Any]] = []
        for i, queue_id in enumerate(span.queue_ids[first:] + span.queue_ids[:first]):
            if left_count <= 0 or left_bytes <= 0:
                break
            key = (span.group, span.topic, queue_id)
            if self._quiet(key, now) and not (recheck and self._looked_again(key, now)):
                self.groups.queues.used(key, now)
                self.groups.scan_filters[key] = span.tag_filter
                continue
            if recheck:
                self._looked_ms[key] = now
            part = self.groups.serve(span.pull(queue_id, min(span.max_count, max(1, left_count // (n - i)))), now,
                                     recheck=recheck)
            left_count -= len(part)
            left_bytes -= sum(m["size"] for m in part)
            msgs += part
        return msgs

    def _quiet(self, key: AckKey, now: int) -> bool:
        """Whether a queue has nothing to hand out, known from memory alone: open, nothing ready or due
        again, no delivery past its visibility deadline, and nothing published past what its index has
        looked at (as far as ``arrived`` notices have told). Its serve would find nothing and change
        nothing, so it is skipped: at low rates a spanning pull names many queues and one has news."""
        q = self.groups.queues.opened(key)
        if q is None or q.has_available:
            return False
        deadline_ms = q.next_deadline_ms()
        if deadline_ms is not None and deadline_ms <= now:
            return False
        published = self.groups.store.published.get((key[1], key[2]))
        return published is not None and published <= q.scan_from

    def _looked_again(self, key: AckKey, now: int) -> bool:
        """A quiet queue's files read again (a notice may have been dropped), at most once every
        ``RECHECK_PARKED_MS`` per queue, the bound the parked pulls' own recheck keeps; True when the
        queue grew."""
        if now < self._looked_ms.get(key, now - RECHECK_PARKED_MS) + RECHECK_PARKED_MS:
            return False
        self._looked_ms[key] = now
        return self.groups.store.recheck(key[1], key[2])
