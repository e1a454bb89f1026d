"""Ack mode inside a reader: the ``ack_pull``, ``ack``, ``nack`` and ``ack_release`` ops (wire:
``mqstore.ipc.wire.receipts``; parsing: ``mqstore.actors.reader.ack_requests``) over the queues this reader owns
(``mqstore.actors.reader.ack_queues``); ``ack_pull_queues`` pulls several at once (``mqstore.actors.reader.ack_spans``).

An ``ack_pull`` indexes what the consume-queue builder has published since (a window at a time),
hands out at most ``prefetch`` unacked messages per consumer and queue, and parks
(``mqstore.actors.reader.long_poll.ParkedAckPulls``) when there is nothing for it, until an ``arrived``
notice, a nack, an ack (room under the prefetch), a visibility timeout or its deadline. Dead letters
go to ``%DLQ%{group}`` through the writer (``mqstore.actors.reader.dead_letters``) and are acked only once it
stored them. With retention's ``keep_unacked`` or ``reclaim_consumed`` the reader's low-water mark
is written every ``LOW_WATER_MS`` (with ``reclaim_consumed``, each queue's progress in it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.config import BrokerConfig
from mqstore.actors.meters import Deliveries
from mqstore.actors.reader.ack_queue import AckQueue, DeadLetter, Located, msg_id_prefix
from mqstore.actors.reader.ack_queues import AckQueues, redelivery_delays
from mqstore.actors.reader.ack_requests import AckKey, AckPull, parse_receipt, resolve_ack_pull
from mqstore.actors.reader.ack_spans import AckSpans
from mqstore.actors.reader.dead_letters import DeadLetterSender
from mqstore.actors.reader.fields import SYSTEM_ERROR
from mqstore.actors.reader.long_poll import RECHECK_PARKED_MS, ParkedAckPull, ParkedAckPulls
from mqstore.actors.reader.moved import MovedCopies
from mqstore.actors.reader.state import PublishedQueue, PublishedStore
from mqstore.engine.consumequeue.entry import entry_live
from mqstore.engine.log.record import Record
from mqstore.engine.read.lookup import TagFilter
from mqstore.engine.reclaim.move import presented
from mqstore.ipc.wire import receipts, requests, schema
from mqstore.ipc.wire.messages import record_to_wire
from mqstore.ipc.wire.replies import (
    AckMarksReply,
    AckPullReply,
    AckQueueStats,
    AckStatsReply,
    MergeAckMarksReply,
    ReleaseReply,
    SettleReply,
)

log = logging.getLogger("mqstore")

LOW_WATER_MS = 1_000             # how often the unacked low-water mark is written for retention
IDLE_FLUSHES_PER_TICK = 8        # idle journals moved into segments per turn of the reader's loop

SendReply = Callable[[bytes, dict[str, Any]], None]


class AckGroups:
    def __init__(self, config: BrokerConfig, reader_index: int, store: PublishedStore, *, ctx: zmq.Context[Any],
                 ingress: str, now_ms: Callable[[], int], delivered: Deliveries | None = None) -> None:
        """``delivered``: where deliveries are counted per topic and group for the metrics (the reader's pulls')."""
        self.cfg = config.broker
        self.keep_unacked = config.retention.keep_unacked or config.retention.reclaim_consumed  # else nobody reads
        # the low-water mark; reclamation reads each queue's progress, per commitlog file
        self.progress_file_size = config.store.geometry.commitlog_file_size if config.retention.reclaim_consumed \
            else None
        self.reader_index = reader_index
        self.store = store
        self.now_ms = now_ms
        self.delivered = delivered if delivered is not None else Deliveries()
        # with move_stragglers_below: where the writer moved messages (read before anything is served)
        self.moves = MovedCopies() if config.retention.move_stragglers_below else None
        self.queues = AckQueues(Path(config.store_dir), reader_index, config.broker,
                                host_prefix=msg_id_prefix(config.store.store_host.packed), now_ms=now_ms,
                                redelivery_delays_ms=redelivery_delays(config.store.delay_levels,
                                                                       config.broker.ack_retry_first_level),
                                moved=self.moves.latest if self.moves is not None else None,
                                holds=self._holds)
        self.parked = ParkedAckPulls()
        self.spans = AckSpans(self)  # ack_pull_queues: several of these queues in one pull
        self.scan_filters: dict[AckKey, TagFilter] = {}  # the filter of each queue's latest pull
        self.dead_letters: DeadLetterSender | None = None
        self._ctx = ctx
        self._ingress = ingress
        self._recheck_at = 0
        self._low_water_at = 0
        self._send_reply: SendReply = lambda identity, reply: None

    def start(self, send_reply: SendReply) -> zmq.Socket[Any]:
        """Connect to the writer's ingress (dead letters go there); returns the socket to poll."""
        self._send_reply = send_reply
        self.follow_moves()
        self.dead_letters = DeadLetterSender(self._ctx, self._ingress, self.now_ms)
        return self.dead_letters.socket

    @property
    def awaiting_writer(self) -> bool:
        """Whether dead letters wait for the writer's reply (``start``'s socket has something to say)."""
        return self.dead_letters is not None and self.dead_letters.awaiting

    @property
    def parked_count(self) -> int:
        return len(self.parked)

    # -- ops ---------------------------------------------------------------------------------------

    def op_ack_pull(self, identity: bytes, request_id: Any, request: requests.AckPull) -> dict[str, Any] | None:
        pull, wait_ms = resolve_ack_pull(request, self.cfg)
        refused = self.not_owner(request_id, pull.key)
        if refused is not None:
            return refused
        if self.queues.opened(pull.key) is None and len(self.queues) >= self.cfg.ack_max_queues:
            return schema.error_reply(request_id, schema.SERVICE_NOT_AVAILABLE, f"reader {self.reader_index} "
                                      f"serves {len(self.queues)} ack-mode queues, its [broker] ack_max_queues")
        now = self.now_ms()
        msgs = self.serve(pull, now, recheck=True)
        if not msgs and wait_ms > 0 and not self.parked.full:
            self.parked.park(ParkedAckPull(identity, request_id, pull, now + wait_ms))
            return None
        return AckPullReply(msgs).encode(request_id)

    def op_ack_release(self, identity: bytes, request_id: Any, release: requests.AckRelease) -> dict[str, Any]:
        """A consumer closes: its parked pulls answered, its deliveries due again at once."""
        keys = [(release.group, release.topic, q) for q in release.queue_ids]
        for key in keys:
            refused = self.not_owner(request_id, key)
            if refused is not None:
                return refused
        now = self.now_ms()
        released = 0
        for key in keys:
            for parked in self.parked.take_consumer(key, release.consumer):
                self._send_reply(parked.identity, AckPullReply([]).encode(parked.request_id))
            q = self.queues.get(key, create=False)
            if q is not None:
                read = {seq for queue_id, seq in release.read or () if queue_id == key[2]}
                released += self.queues.guarded(key, partial(q.release, release.consumer, read))
                self._send_dead_letters(key, now)
                self._wake(key, now)
        return ReleaseReply(released).encode(request_id)

    def op_ack_stats(self, identity: bytes, request_id: Any, request: requests.AckStats) -> dict[str, Any]:
        """Per ack-mode queue this reader has open: ready, unacked, redelivered, dead (the metrics)."""
        queues = []
        for (group, topic, queue_id), q in self.queues.items():
            view = self.store.published_queue(topic, queue_id)
            counts = q.counts(view.max_queue_offset if view is not None else 0)
            queues.append(AckQueueStats(group, topic, queue_id, **counts))
        return AckStatsReply(tuple(queues)).encode(request_id)

    def op_ack_marks(self, identity: bytes, request_id: Any, request: requests.AckMarks) -> dict[str, Any]:
        """How far each group this reader owns acked each queue (``AckProgress.acked_below``)."""
        marks = []
        for key in self.queues.owned_on_disk():
            q = self.queues.get(key, create=False)
            if q is not None:
                held = q.unacked_located()
                marks.append((*key, min(held) if held else q.scan_from))
        return AckMarksReply(tuple(marks)).encode(request_id)

    def op_merge_ack_marks(self, identity: bytes, request_id: Any, request: requests.MergeAckMarks) -> dict[str, Any]:
        """A master's ack marks taken in (``AckQueues.take_marks``), never past a queue's end here."""
        moved, acked, clamped = self.queues.take_marks(request.marks, self._queue_end)
        return MergeAckMarksReply(moved, acked, tuple(clamped)).encode(request_id)

    def _queue_end(self, topic: str, queue_id: int) -> int:
        self.store.recheck(topic, queue_id)  # the builder's newest entries, whether notices came or not
        view = self.store.published_queue(topic, queue_id)
        return view.max_queue_offset if view is not None else 0

    def not_owner(self, request_id: Any, key: AckKey) -> dict[str, Any] | None:
        owner = self.queues.owner(key)
        if owner == self.reader_index:
            return None
        return schema.error_reply(request_id, receipts.NOT_OWNER,
                                  f"{'/'.join(map(str, key))} is served by reader {owner}, not {self.reader_index}")

    def op_ack(self, identity: bytes, request_id: Any, request: requests.Ack) -> dict[str, Any]:
        return self._settle(request_id, request.receipts, None)

    def op_nack(self, identity: bytes, request_id: Any, request: requests.Nack) -> dict[str, Any]:
        return self._settle(request_id, request.receipts, request.requeue is not False)

    def _settle(self, request_id: Any, raw: tuple[Any, ...], requeue: bool | None) -> dict[str, Any]:
        """ack (``requeue`` None) or nack a list of receipts; one status per receipt."""
        results: list[str] = [receipts.BAD_REQUEST] * len(raw)
        by_key: dict[AckKey, list[tuple[int, int]]] = {}
        for i, receipt in enumerate(raw):
            parsed = parse_receipt(receipt)
            if parsed is None:
                continue
            key, seq = parsed
            if self.queues.owner(key) != self.reader_index:
                results[i] = receipts.NOT_OWNER
            else:
                by_key.setdefault(key, []).append((i, seq))
        now = self.now_ms()
        for key, items in by_key.items():
            q = self.queues.get(key, create=False)
            if q is None:
                statuses = [receipts.UNKNOWN_RECEIPT] * len(items)
            else:
                seqs = [seq for _, seq in items]
                statuses = self.queues.guarded(key, partial(q.ack, seqs) if requeue is None
                                               else partial(q.nack, seqs, requeue=requeue, now_ms=now))
                self.queues.used(key, now)
            for (i, _), status in zip(items, statuses, strict=True):
                results[i] = status
            if q is not None:
                self._send_dead_letters(key, now)
                self._wake(key, now)  # a requeue made messages available, an ack made room
        return SettleReply(results).encode(request_id)

    # -- serving a pull ----------------------------------------------------------------------------

    def serve(self, pull: AckPull, now: int, *, recheck: bool = False) -> list[dict[str, Any]]:
        key = pull.key
        view = self.store.published_queue(pull.topic, pull.queue_id)
        q = self.queues.get(key, create=view is not None)
        if q is None:
            return []
        self.queues.used(key, now)
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
        handouts = self.queues.guarded(key, lambda: q.take(pull.consumer, room, now, pull.visibility_ms))
        msgs: list[dict[str, Any]] = []
        dropped: list[int] = []
        for h in handouts:
            record = self._record(pull.topic, pull.queue_id, h.seq, h.phys_offset, h.size)
            if record is None:
                dropped.append(h.seq)
            elif not pull.tag_filter.matches(record.tags):
                dropped.append(h.seq)  # a tag hash collision let it through the index's filter
            else:
                msgs.append(dict(record_to_wire(record), seq=h.seq, redelivered=h.redelivered,
                                 delivery_count=h.delivery_count))
        if dropped:
            self.queues.guarded(key, lambda: q.ack(dropped))
        if msgs:
            self.delivered.add(pull.group, pull.topic, len(msgs), sum(m["size"] for m in msgs))
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
                   if entry_live(phys, size, commitlog_min) and (not codes or code in codes)]
        self.queues.guarded(key, lambda: q.publish(located, start + len(entries)))

    def _holds(self, key: AckKey, seq: int, phys_offset: int, size: int) -> bool:
        """Whether the commitlog holds message ``seq`` of the queue at ``phys_offset`` (or a copy moved
        from there): what an index replays after a crash must name a message, not a torn page."""
        if self.moves is not None and self.moves.where(phys_offset) is not None:
            return True
        record = self.store.record_at(phys_offset, size)
        return record is not None and (record.topic, record.queue_id, record.queue_offset) == (key[1], key[2], seq)

    def _record(self, topic: str, queue_id: int, seq: int, phys_offset: int, size: int) -> Record | None:
        """The message at ``phys_offset`` as it was stored (a moved one: its copy, presented as the
        original); None when it is gone."""
        record = self.store.record_at(phys_offset, size)
        if record is None and self.moves is not None:  # moved since this reader last looked
            self.follow_moves()
            where = self.moves.where(phys_offset)
            record = self.store.record_at(*where) if where is not None else None
        if record is not None:
            record = presented(record)
        if record is None or record.topic != topic or record.queue_id != queue_id or record.queue_offset != seq:
            log.warning("ack mode: %s/%d@%d is gone from the commitlog (retention); dropped", topic, queue_id, seq)
            return None
        return record

    # -- parked pulls ------------------------------------------------------------------------------

    def _wake(self, key: AckKey, now: int) -> None:
        """Serve again the pulls parked on ``key``, oldest first; those that get messages are answered."""
        for seq, parked in self.parked.waiting(key):
            try:
                msgs = (self.serve(parked.pull, now) if isinstance(parked, ParkedAckPull)
                        else self.spans.serve_woken(parked.span, key[2], now))
            except Exception as exc:  # the reader's error boundary, for a pull it answers later
                log.exception("parked ack pull failed")
                self.parked.unpark(key, seq)
                self._send_reply(parked.identity, schema.error_reply(parked.request_id, SYSTEM_ERROR,
                                                                     f"{type(exc).__name__}: {exc}"))
                continue
            if msgs:
                self.parked.unpark(key, seq)
                self._send_reply(parked.identity, AckPullReply(msgs).encode(parked.request_id))

    def on_grew(self, topic: str, queue_id: int) -> None:
        """An ``arrived`` notice (or a file check) says the queue grew."""
        now = self.now_ms()
        for key in [k for k in self.parked.waited_on() if k[1] == topic and k[2] == queue_id]:
            self._wake(key, now)

    # -- housekeeping ------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        """Expired deliveries back, parked pulls past their deadline answered, lost notices made up
        for, dead letters (re)sent, idle journals moved into segments."""
        flushes = 0
        for key, q in self.queues.items():
            deadline = q.next_deadline_ms()
            if deadline is not None and deadline <= now and q.expire(now):
                self._wake(key, now)
            retry_ms = q.next_retry_ms()
            if retry_ms is not None and retry_ms <= now and q.promote(now):
                self._wake(key, now)
            if q.dead:
                self._send_dead_letters(key, now)
            if (q.index.dirty_count and flushes < IDLE_FLUSHES_PER_TICK
                    and self.queues.idle_ms(key, now) >= self.cfg.ack_idle_flush_ms):
                flushes += 1  # each writes segment files: many at once would stall every client
                self.queues.guarded(key, q.index.flush)
        for parked in self.parked.expired(now):
            self._send_reply(parked.identity, AckPullReply([]).encode(parked.request_id))
        if now >= self._recheck_at:
            self._recheck_at = now + RECHECK_PARKED_MS
            for key in self.parked.waited_on():
                if self.store.recheck(key[1], key[2]):
                    self._wake(key, now)
        if self.dead_letters is not None:
            self.dead_letters.expire(now)
        if now >= self._low_water_at and self.keep_unacked:
            self._low_water_at = now + LOW_WATER_MS
            self.follow_moves()
            self.queues.write_low_water(self.progress_file_size, stragglers=self.moves is not None)

    def follow_moves(self) -> None:
        """Read the copies the writer appended since; the open queues read those messages there now
        (a queue opened later reads them there from the start)."""
        if self.moves is None:
            return
        moves = self.moves.refresh(self.store)
        relocated = sum(q.relocate(moves) for _, q in self.queues.items()) if moves else 0
        if relocated:
            log.info("ack mode: %d message(s) now read from their moved copies", relocated)

    def ms_to_next(self, now: int, cap_ms: int) -> int:
        due = [d for _, q in self.queues.items() for d in (q.next_deadline_ms(), q.next_retry_ms()) if d is not None]
        return max(0, min([self.parked.ms_to_next_deadline(now, cap_ms), *(d - now for d in due)]))

    def close(self) -> None:
        """On stop: parked pulls answered empty, every queue closed clean."""
        for parked in self.parked.drain():
            self._send_reply(parked.identity, AckPullReply([]).encode(parked.request_id))
        self.queues.close()

    # -- dead letters ------------------------------------------------------------------------------

    def _send_dead_letters(self, key: AckKey, now: int) -> None:
        q = self.queues.opened(key)
        if q is None or not q.dead or self.dead_letters is None:
            return
        letters: list[tuple[DeadLetter, Record]] = []
        gone: list[int] = []
        for d in self.dead_letters.pending(key, q.dead, now):
            record = self._record(key[1], key[2], d.seq, d.phys_offset, d.size)
            if record is None:
                gone.append(d.seq)
            else:
                letters.append((d, record))
        if gone:
            self.queues.guarded(key, partial(q.dead_lettered, gone))
        self.dead_letters.send(key, letters, now)

    def on_writer_reply(self) -> None:
        """Dead letters the writer stored are acked."""
        assert self.dead_letters is not None
        for key, stored in self.dead_letters.stored():
            q = self.queues.opened(key)
            if q is not None and stored:
                self.queues.guarded(key, partial(q.dead_lettered, stored))
