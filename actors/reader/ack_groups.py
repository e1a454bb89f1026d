"""Ack mode inside a reader: the ``ack_pull``, ``ack``, ``nack`` and ``ack_release`` ops (wire:
``ipc.receipts``; parsing: ``actors.reader.ack_requests``) over the (group, topic, queue) queue indexes this
reader owns, at ``{store}/queueindex/{group}/{topic}/{queue}/``.

Ownership is ``ipc.receipts.ack_owner``: exactly one reader holds each index and its in-flight table
(``actors.reader.ack_queue``), so no message is in two consumers' hands at once. Indexes open on first use
and recover from their journal; a clean stop closes them clean.

An ``ack_pull`` indexes what the consume-queue builder has published since (a window at a time),
hands out at most ``prefetch`` unacked messages per consumer and queue, and parks when there is
nothing for it, until an ``arrived`` notice, a nack, an ack (room under the prefetch), a visibility
timeout or its deadline. Dead letters go to ``%DLQ%{group}`` through the writer
(``actors.reader.dead_letters``) and are acked only once it stored them.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import zmq

from actors.reader.ack_queue import AckQueue, DeadLetter, Handout, Located, msg_id_prefix
from actors.reader.ack_requests import AckKey, AckPull, parse_ack_pull, parse_ack_release, parse_receipt
from actors.reader.dead_letters import DeadLetterSender
from actors.reader.state import PublishedQueue, PublishedStore, record_to_wire
from actors.runtime import Runtime
from engine.ackindex.files import QueueIndexError
from engine.ackindex.low_water import QUEUE_INDEX_DIR, write_low_water
from engine.consumequeue.consume_queue import FILLER_SIZE
from engine.log.record import Record
from engine.lookup import TagFilter
from ipc import receipts, schema

log = logging.getLogger("mqstore")

T = TypeVar("T")
MAX_PARKED = 65_536
RECHECK_PARKED_MS = 2_000        # a waited-on queue is read off its files this often (lost notices)
LOW_WATER_MS = 1_000             # how often the unacked low-water mark is written for retention
IDLE_FLUSHES_PER_TICK = 8        # idle journals moved into segments per turn of the reader's loop


@dataclass(frozen=True, slots=True)
class _Parked:
    identity: bytes
    request_id: Any
    pull: AckPull
    deadline_ms: int


class AckGroups:
    def __init__(self, runtime: Runtime, reader_index: int, store: PublishedStore,
                 now_ms: Callable[[], int]) -> None:
        self.rt = runtime
        self.cfg = runtime.config.broker
        self.reader_index = reader_index
        self.store = store
        self.store_dir = Path(runtime.config.store_dir)
        self.root = self.store_dir / QUEUE_INDEX_DIR
        self.host_prefix = msg_id_prefix(runtime.config.store.store_host.packed)
        self.now_ms = now_ms
        self.queues: dict[AckKey, AckQueue] = {}
        self.last_op_ms: dict[AckKey, int] = {}
        self.scan_filters: dict[AckKey, TagFilter] = {}
        self.parked: dict[AckKey, dict[int, _Parked]] = {}
        self._deadlines: list[tuple[int, int, AckKey]] = []
        self._parked_seq = itertools.count()
        self._recheck_at = 0
        self._low_water_at = 0
        self._low_water: int | None = -2  # what was last written (-2: nothing yet)
        self.dead_letters: DeadLetterSender | None = None
        self._send_reply: Callable[[bytes, dict[str, Any]], None] = lambda identity, reply: None

    def start(self, send_reply: Callable[[bytes, dict[str, Any]], None]) -> zmq.Socket[Any]:
        """Connect to the writer's ingress (dead letters go there); returns the socket to poll."""
        self._send_reply = send_reply
        self.dead_letters = DeadLetterSender(self.rt.ctx, self.rt.endpoints.ingress, self.now_ms)
        return self.dead_letters.socket

    @property
    def parked_count(self) -> int:
        return sum(len(p) for p in self.parked.values())

    # -- ops ---------------------------------------------------------------------------------------

    def op_ack_pull(self, identity: bytes, request_id: Any, message: dict[str, Any]) -> dict[str, Any] | None:
        pull, wait_ms = parse_ack_pull(message, self.cfg)
        refused = self._not_owner(request_id, pull.key)
        if refused is not None:
            return refused
        if pull.key not in self.queues and len(self.queues) >= self.cfg.ack_max_queues:
            return schema.error_reply(request_id, schema.SERVICE_NOT_AVAILABLE, f"reader {self.reader_index} "
                                      f"serves {len(self.queues)} ack-mode queues, its [broker] ack_max_queues")
        now = self.now_ms()
        msgs = self._serve(pull, now, recheck=True)
        if not msgs and wait_ms > 0 and self.parked_count < MAX_PARKED:
            seq = next(self._parked_seq)
            self.parked.setdefault(pull.key, {})[seq] = _Parked(identity, request_id, pull, now + wait_ms)
            heapq.heappush(self._deadlines, (now + wait_ms, seq, pull.key))
            return None
        return schema.ok_reply(request_id, msgs=msgs)

    def op_ack_release(self, identity: bytes, request_id: Any, message: dict[str, Any]) -> dict[str, Any]:
        """A consumer closes: its parked pulls answered, its deliveries due again at once."""
        release = parse_ack_release(message)
        keys = [(release.group, release.topic, q) for q in release.queue_ids]
        for key in keys:
            refused = self._not_owner(request_id, key)
            if refused is not None:
                return refused
        now = self.now_ms()
        released = 0
        for key in keys:
            waiting = self.parked.get(key, {})
            for seq, parked in list(waiting.items()):
                if parked.pull.consumer == release.consumer:
                    del waiting[seq]
                    self._send_reply(parked.identity, schema.ok_reply(parked.request_id, msgs=[]))
            if not waiting:
                self.parked.pop(key, None)
            q = self._queue(key, create=False)
            if q is not None:
                read = {seq for queue_id, seq in release.read if queue_id == key[2]}
                released += self._guarded(key, partial(q.release, release.consumer, read))
                self._send_dead_letters(key, now)
                self._wake(key, now)
        return schema.ok_reply(request_id, released=released)

    def _not_owner(self, request_id: Any, key: AckKey) -> dict[str, Any] | None:
        owner = receipts.ack_owner(*key, self.cfg.readers)
        if owner == self.reader_index:
            return None
        return schema.error_reply(request_id, receipts.NOT_OWNER,
                                  f"{'/'.join(map(str, key))} is served by reader {owner}, not {self.reader_index}")

    def op_ack(self, identity: bytes, request_id: Any, message: dict[str, Any]) -> dict[str, Any]:
        return self._settle(request_id, message, None)

    def op_nack(self, identity: bytes, request_id: Any, message: dict[str, Any]) -> dict[str, Any]:
        return self._settle(request_id, message, schema.field(message, "requeue", bool, default=True))

    def _settle(self, request_id: Any, message: dict[str, Any], requeue: bool | None) -> dict[str, Any]:
        """ack (``requeue`` None) or nack a list of receipts; one status per receipt."""
        raw = schema.field(message, "receipts", list)
        if len(raw) > receipts.MAX_RECEIPTS:
            raise schema.SchemaError(f"at most {receipts.MAX_RECEIPTS} receipts per request")
        results: list[str] = [receipts.BAD_REQUEST] * len(raw)
        by_key: dict[AckKey, list[tuple[int, int]]] = {}
        for i, receipt in enumerate(raw):
            parsed = parse_receipt(receipt)
            if parsed is None:
                continue
            key, seq = parsed
            if receipts.ack_owner(*key, self.cfg.readers) != self.reader_index:
                results[i] = receipts.NOT_OWNER
            else:
                by_key.setdefault(key, []).append((i, seq))
        now = self.now_ms()
        for key, items in by_key.items():
            q = self._queue(key, create=False)
            if q is None:
                statuses = [receipts.UNKNOWN_RECEIPT] * len(items)
            else:
                seqs = [seq for _, seq in items]
                statuses = self._guarded(key, partial(q.ack, seqs) if requeue is None
                                         else partial(q.nack, seqs, requeue=requeue))
                self.last_op_ms[key] = now
            for (i, _), status in zip(items, statuses, strict=True):
                results[i] = status
            if q is not None:
                self._send_dead_letters(key, now)
                self._wake(key, now)  # a requeue made messages available, an ack made room
        return schema.ok_reply(request_id, results=results)

    # -- serving a pull ----------------------------------------------------------------------------

    def _serve(self, pull: AckPull, now: int, *, recheck: bool = False) -> list[dict[str, Any]]:
        key = pull.key
        view = self.store.published_queue(pull.topic, pull.queue_id)
        q = self._queue(key, create=view is not None)
        if q is None:
            return []
        self.last_op_ms[key] = now
        if q.expire(now):
            self._send_dead_letters(key, now)
        room = min(pull.max_count, pull.prefetch - q.in_flight_of(pull.consumer))
        if room <= 0:
            return []
        self.scan_filters[key] = pull.tag_filter
        if view is not None:
            self._top_up(key, q, view)
            # a dropped notice must not make a consumer wait: look at the files before parking
            if recheck and not q.has_available and self.store.recheck(pull.topic, pull.queue_id):
                self._top_up(key, q, self.store.published_queue(pull.topic, pull.queue_id))
        handouts = self._guarded(key, lambda: q.take(pull.consumer, room, now, pull.visibility_ms))
        msgs: list[dict[str, Any]] = []
        dropped: list[int] = []
        for h in handouts:
            record = self._record(pull.topic, pull.queue_id, h)
            if record is None:
                dropped.append(h.seq)
            elif not pull.tag_filter.matches(record.tags):
                dropped.append(h.seq)  # a tag hash collision let it through the index's filter
            else:
                msgs.append(dict(record_to_wire(record), seq=h.seq, redelivered=h.redelivered,
                                 delivery_count=h.delivery_count))
        if dropped:
            self._guarded(key, lambda: q.ack(dropped))
        return msgs

    def _top_up(self, key: AckKey, q: AckQueue, view: PublishedQueue | None) -> None:
        """Index the next window of published entries: a new group starts at the queue's min."""
        room = q.publish_room()
        if view is None or room <= 0:
            return
        start = max(q.scan_from, view.min_queue_offset)
        if start >= view.max_queue_offset:
            return
        entries = view.read(start, room)
        if len(entries) == 0:
            q.publish([], start)  # the min moved past what the index had not seen
            return
        codes = self.scan_filters.get(key, TagFilter.parse("*")).codes
        commitlog_min = self.store.commitlog.min_offset
        located = [Located(start + i, phys, size)
                   for i, (phys, size, code) in enumerate(entries.tolist())
                   if phys >= commitlog_min and 0 < size != FILLER_SIZE and (not codes or code in codes)]
        self._guarded(key, lambda: q.publish(located, start + len(entries)))

    def _record(self, topic: str, queue_id: int, h: Handout) -> Record | None:
        record = self.store.record_at(h.phys_offset, h.size)
        if record is None or record.topic != topic or record.queue_id != queue_id or record.queue_offset != h.seq:
            log.warning("ack mode: %s/%d@%d is gone from the commitlog (retention); dropped", topic, queue_id, h.seq)
            return None
        return record

    # -- queues --------------------------------------------------------------------------------------

    def _queue(self, key: AckKey, *, create: bool) -> AckQueue | None:
        q = self.queues.get(key)
        if q is not None:
            return q
        directory = self.root / key[0] / key[1] / str(key[2])
        if not create and not directory.is_dir():
            return None
        q = AckQueue.open(directory, host_prefix=self.host_prefix, max_deliveries=self.cfg.ack_max_deliveries,
                          max_journal_entries=self.cfg.ack_max_journal_entries)
        log.info("ack mode: opened %s/%s/%d (%s recovery): %d unacked, %d due again", *key,
                 q.index.recovery.kind.name.lower(), q.index.unacked_count, q.retry_count)
        self.queues[key] = q
        self.last_op_ms[key] = self.now_ms()
        return q

    def _guarded(self, key: AckKey, change: Callable[[], T]) -> T:
        """Run a change of a queue's index; if it fails, the memory no longer matches the files:
        forget the queue (the next request reopens it and recovers) and let the fault be reported."""
        try:
            return change()
        except (QueueIndexError, OSError):
            q = self.queues.pop(key, None)
            if q is not None:
                q.close(clean=False)
            raise

    # -- parked pulls ------------------------------------------------------------------------------

    def _wake(self, key: AckKey, now: int) -> None:
        """Serve again the pulls parked on ``key``, oldest first; those that get messages are answered."""
        waiting = self.parked.get(key)
        if not waiting:
            return
        for seq, parked in list(waiting.items()):
            try:
                msgs = self._serve(parked.pull, now)
            except Exception as exc:  # the reader's error boundary, for a pull it answers later
                log.exception("parked ack pull failed")
                del waiting[seq]
                self._send_reply(parked.identity, schema.error_reply(parked.request_id, "SYSTEM_ERROR",
                                                                     f"{type(exc).__name__}: {exc}"))
                continue
            if msgs:
                del waiting[seq]
                self._send_reply(parked.identity, schema.ok_reply(parked.request_id, msgs=msgs))
        if not waiting:
            self.parked.pop(key, None)

    def on_grew(self, topic: str, queue_id: int) -> None:
        """An ``arrived`` notice (or a file check) says the queue grew."""
        now = self.now_ms()
        for key in [k for k in self.parked if k[1] == topic and k[2] == queue_id]:
            self._wake(key, now)

    # -- housekeeping ------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        """Expired deliveries back, parked pulls past their deadline answered, lost notices made up
        for, dead letters (re)sent, idle journals moved into segments."""
        flushes = 0
        for key, q in list(self.queues.items()):
            deadline = q.next_deadline_ms()
            if deadline is not None and deadline <= now and q.expire(now):
                self._wake(key, now)
            if q.dead:
                self._send_dead_letters(key, now)
            if (q.index.dirty_count and flushes < IDLE_FLUSHES_PER_TICK
                    and now - self.last_op_ms.get(key, now) >= self.cfg.ack_idle_flush_ms):
                flushes += 1  # each writes segment files: many at once would stall every client
                self._guarded(key, q.index.flush)
        while self._deadlines and self._deadlines[0][0] <= now:
            _, seq, key = heapq.heappop(self._deadlines)
            waiting = self.parked.get(key)
            parked = waiting.pop(seq, None) if waiting else None
            if parked is not None:
                self._send_reply(parked.identity, schema.ok_reply(parked.request_id, msgs=[]))
                if not waiting:
                    del self.parked[key]
        if now >= self._recheck_at:
            self._recheck_at = now + RECHECK_PARKED_MS
            for key in list(self.parked):
                if self.store.recheck(key[1], key[2]):
                    self._wake(key, now)
        if self.dead_letters is not None:
            self.dead_letters.expire(now)
        if now >= self._low_water_at and self.rt.config.retention.keep_unacked:  # its only reader
            self._low_water_at = now + LOW_WATER_MS
            self._write_low_water()

    def _owned_on_disk(self) -> list[AckKey]:
        """Every (group, topic, queue) index directory this reader owns, opened or not."""
        keys: list[AckKey] = []
        if self.root.is_dir():
            for queue_dir in self.root.glob("*/*/*"):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    key = (queue_dir.parent.parent.name, queue_dir.parent.name, int(queue_dir.name))
                    if receipts.ack_owner(*key, self.cfg.readers) == self.reader_index:
                        keys.append(key)
        return keys

    def low_water_phys(self) -> int | None:
        """The commitlog offset of the oldest message any owned group has not acked (None: none)."""
        low: int | None = None
        for key in self._owned_on_disk():
            q = self._queue(key, create=False)
            if q is None or not q.index.unacked_count:
                continue
            seq = q.index.lowest_unacked_seq_id()
            entries = q.index.read(seq, seq + 1)
            if entries:
                phys = int.from_bytes(entries[0].msg_id[-8:], "big")  # offsetMsgId: host, then phys offset
                low = phys if low is None else min(low, phys)
        return low

    def _write_low_water(self) -> None:
        """This reader's mark (``engine.ackindex.low_water``): what retention must keep when ``keep_unacked``."""
        low = self.low_water_phys()
        if low != self._low_water:
            write_low_water(self.store_dir, self.reader_index, low)
            self._low_water = low

    def ms_to_next(self, now: int, cap_ms: int) -> int:
        due = [d for q in self.queues.values() if (d := q.next_deadline_ms()) is not None]
        while self._deadlines and self._deadlines[0][1] not in self.parked.get(self._deadlines[0][2], {}):
            heapq.heappop(self._deadlines)
        if self._deadlines:
            due.append(self._deadlines[0][0])
        return max(0, min([cap_ms, *(d - now for d in due)]))

    def close(self) -> None:
        """On stop: parked pulls answered empty, every index closed clean (in-flight messages are
        delivered-unacked in it, so they come back redelivered)."""
        for waiting in self.parked.values():
            for parked in waiting.values():
                self._send_reply(parked.identity, schema.ok_reply(parked.request_id, msgs=[]))
        self.parked.clear()
        failed: BaseException | None = None
        for q in self.queues.values():
            try:
                q.close(clean=True)
            except (QueueIndexError, OSError) as exc:
                failed = exc  # the others still close; the dirty one recovers on the next open
        self.queues.clear()
        if failed is not None:
            raise failed

    # -- dead letters ------------------------------------------------------------------------------

    def _send_dead_letters(self, key: AckKey, now: int) -> None:
        q = self.queues.get(key)
        if q is None or not q.dead or self.dead_letters is None:
            return
        letters: list[tuple[DeadLetter, Record]] = []
        gone: list[int] = []
        for d in self.dead_letters.pending(key, q.dead, now):
            record = self._record(key[1], key[2], Handout(d.seq, d.phys_offset, d.size, True, d.delivery_count))
            if record is None:
                gone.append(d.seq)
            else:
                letters.append((d, record))
        if gone:
            self._guarded(key, partial(q.dead_lettered, gone))
        self.dead_letters.send(key, letters, now)

    def on_writer_reply(self) -> None:
        """Dead letters the writer stored are acked."""
        assert self.dead_letters is not None
        for key, stored in self.dead_letters.stored():
            q = self.queues.get(key)
            if q is not None and stored:
                self._guarded(key, partial(q.dead_lettered, stored))
