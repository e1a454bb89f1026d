"""The ``timer`` actor: RocketMQ 5's timer pipeline in one process and one loop.

- enqueue: the ``rmq_sys_wheel_timer`` consume queue (``mqstore.actors.timer.source``) is walked from the
  checkpoint's next queue offset into the timerlog and the wheel (``mqstore.engine.timer.store``) when an
  ``arrived`` notice of the consume-queue builder names the timer topic, and at least every tick;
- dequeue: each slot T is delivered once ``now >= T + P`` (P = ``timer_precision_ms``; empty slots
  are skipped in one array comparison): its records, first enqueued first, are read from the
  commitlog and put back through the writer's ingress in batches (``mqstore.actors.timer.reput``), then the
  read time moves to T + P. The loop sleeps until the next slot that holds records is due, a notice
  comes or the tick's safety net (the read time passes the empty slots then);
- flush: timerlog, wheel and ``config/timercheck`` on ``timer_flush_interval_ms`` and on stop;
- clean: every ``CLEAN_INTERVAL_MS`` the timerlog files that name only commitlog records retention
  deleted go (``mqstore.engine.timer.log``), as RocketMQ's timer store does every 30 s.

No timer lost, none delivered twice, whenever the actor (or the whole broker) is killed:

- enqueue: a record is appended before its slot points at it and before the checkpoint's next queue
  offset moves, which waits in memory until the commitlog and the timerlog are flushed past the
  records it counts (``mqstore.actors.timer.enqueued``); recovery cuts the log at the first record
  whose message the commitlog does not hold (a power cut), re-points slots from the log and takes
  the queue offset after the last record's, the checkpoint's kept within the timer queue's
  recovered end, so an entry is enqueued once, whatever was cut.
- dequeue: before a batch is sent the checkpoint holds ``in_flight_phys`` (where the batch can be
  stored from at the earliest: the last copy stored, or the writer's end from a ping); once the
  writer answered PUT_OK it holds the slot and the last timerlog offset delivered, and only once
  every record of the slot is done does the read time move past it. Each copy carries
  ``TIMER_FROM_PHYS_OFFSET``, the offset of its timer record. After a kill (or a send the writer
  never answered) the commitlog from ``in_flight_phys`` on is read for
  those names: the copies found are not sent again, the rest are. These fields live in memory
  (``mqstore.actors.timer.delivery``) and reach the checkpoint's mapping only once the commitlog is
  flushed past the copies they count, with a floor at or below every copy they do not: a SIGKILL or
  a power cut leaves an older state, and the copies made since are found from its floor. The read
  happens only once the writer has appended whatever was sent before (two pings, ``_settled_end``):
  a batch unanswered in time may yet be written, and one a killed actor left in the writer's socket
  is written within a writer round, long before the restarted actor's first batch settles; until it
  is read, ``in_flight_phys`` stays set.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.flushed import FlushedFollower, sync_commitlog
from mqstore.actors.runtime import Runtime
from mqstore.actors.ticks import IDLE_TICK_MS
from mqstore.actors.timer.delivery import Delivery
from mqstore.actors.timer.enqueued import Enqueued
from mqstore.actors.timer.reput import Copy, RePutter, copies_since, copy_of
from mqstore.actors.timer.source import TimerQueue
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.timer.claim import claim_problem, claimed_in
from mqstore.engine.timer.put_rule import PROP_REAL_TOPIC, PROP_TIMER_OUT_MS, TIMER_TOPIC
from mqstore.engine.timer.store import TimerStore
from mqstore.engine.timer.wheel import SLOTS_TOTAL, WHEEL_FILE
from mqstore.ipc.transport.sockets import connect
from mqstore.ipc.wire import schema

log = logging.getLogger("mqstore")

BATCH_MESSAGES = 1024
BATCH_BYTES = 4 * 1024 * 1024
RETRY_MS = 500
_TOPIC_BYTES = TIMER_TOPIC.encode()
NOTICE_GAP_MS = 25  # at most 40 wake-ups a second for notices; a timer topic notice waits at most this long
CLEAN_INTERVAL_MS = 30_000  # RocketMQ's timerlog cleaning period
BLANK_SLOTS = 60  # RocketMQ's TIMER_BLANK_SLOTS: how far inside the wheel's span a late restart starts


class TimerActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        cfg = runtime.config.store
        self.store_dir = Path(runtime.config.store_dir)
        self.precision_ms = cfg.timer_precision_ms
        self.flush_interval_ms = cfg.timer_flush_interval_ms
        self.commitlog = CommitLog.open(self.store_dir / "commitlog", cfg.geometry.commitlog_file_size, writable=False,
                                        open_files=runtime.open_files)
        self.queue = TimerQueue(self.store_dir, cfg.geometry.cq_entries_per_file, self.commitlog)
        self.config = cfg
        self._store: TimerStore | None = None  # the timer files, made when the first timer comes
        self._delivery: Delivery | None = None  # the dequeue's progress, made with the files
        self._enqueued: Enqueued | None = None  # the enqueue's, likewise
        broker = runtime.config.broker
        self.batch_messages = min(BATCH_MESSAGES, broker.max_batch_messages)  # a send the writer takes whole
        self.batch_bytes = min(BATCH_BYTES, broker.max_request_bytes // 2)
        self.already: set[int] = set()   # timer records whose copies a restart found stored
        self.copied: set[int] = set()    # timer records past the enqueue's mark with copies stored: not enqueued again
        self.delivered = 0

    @property
    def store(self) -> TimerStore:
        if self._store is None:
            raise RuntimeError("the timer files are not open")
        return self._store

    @property
    def enqueued(self) -> Enqueued:
        if self._enqueued is None:
            raise RuntimeError("the timer files are not open")
        return self._enqueued

    @property
    def delivery(self) -> Delivery:
        if self._delivery is None:
            raise RuntimeError("the timer files are not open")
        return self._delivery

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        self.queue.close()
        self.commitlog.close()

    # -- recovery ----------------------------------------------------------------------------------

    def open_store(self, create: bool) -> bool:
        """Open (and recover) the timer files once they exist, or make them when ``create``: a broker
        that never sees a timer has none (the wheel alone is 38 MB). A disk too full to make them is
        waited out, a tick at a time, like the writer's full disk, instead of failing the actor."""
        if self._store is None and (create or (self.store_dir / WHEEL_FILE).exists()):
            try:
                self._store = TimerStore.open(self.store_dir, self.config)
            except OSError as exc:
                log.warning("timer: cannot open the timer files (%s); retrying", exc)
                return False
            self.recover()
        return self._store is not None

    def recover(self) -> None:
        checkpoint = self.store.checkpoint
        now = wall_ms()
        floor_now = now // self.precision_ms * self.precision_ms
        self.commitlog.queue.refresh()
        if checkpoint.created:  # a floor below every copy to come, on the disk before the first is made
            last_file = self.commitlog.queue.last_file
            checkpoint.last_read_ms = floor_now
            checkpoint.in_flight_phys = last_file.file_base if last_file is not None else 0
            checkpoint.flush(now)
        checkpoint.last_read_ms = max(checkpoint.last_read_ms,
                                      floor_now - (SLOTS_TOTAL - BLANK_SLOTS) * self.precision_ms)
        last_phys = self.store.recover(claimed_in(self.commitlog, self.precision_ms))
        last = self.queue.record_at(last_phys) if last_phys >= 0 else None
        found = last.queue_offset if last is not None else \
            self.queue.queue_offset_of(last_phys) if last_phys >= 0 else None
        # the checkpoint's offset, brought back to the queue's recovered end (a power cut may have
        # taken records it counted, whose offsets the sends after recovery take again), and never
        # below the entry of the last record in the timerlog
        next_offset = max(min(checkpoint.next_queue_offset, self.queue.end_queue_offset()),
                          found + 1 if found is not None else 0, self.queue.min_queue_offset)
        if next_offset < checkpoint.next_queue_offset:
            checkpoint.next_queue_offset = next_offset  # lower is always safe to keep
        self._enqueued = Enqueued(next_offset, last.phys_offset + last.size if last is not None else 0)
        self._enqueued.offer(self.store.log.end_pos)
        # the entries enqueued again from here may have been delivered before a power cut took their
        # timerlog records (a delivery mark the checkpoint got ahead of the enqueue's, as written before
        # the delivery waited for it; a record rolled or delivered since an older state): every copy
        # lies past its timer record, so the commitlog from the first of them holds their copies
        first = next(self.queue.records(next_offset, 1), None) if not checkpoint.created else None
        if first is not None:
            self.copied = copies_since(self.commitlog, first[1].phys_offset)
        if checkpoint.in_flight_phys >= 0 and not checkpoint.created:
            self.already = copies_since(self.commitlog, checkpoint.in_flight_phys)
        # every copy the last run made is for a slot due by now: until those are delivered again, the
        # floor a written state carries stays at or below the copies found
        self._delivery = Delivery(checkpoint, floor_now + self.precision_ms)
        log.info("timer: reading slot %d, enqueuing from queue offset %d, %d copies found stored, %d of them "
                 "past it", checkpoint.last_read_ms, next_offset, len(self.already | self.copied), len(self.copied))

    # -- the loop ----------------------------------------------------------------------------------

    def run(self) -> None:
        self.open_store(create=False)
        self.rt.report("running", force=True, **self.stats())
        arrived = connect(self.rt.ctx, zmq.SUB, self.rt.endpoints.arrived, subscribe=(schema.ARRIVED,))
        poller = zmq.Poller()
        poller.register(arrived, zmq.POLLIN)
        poller.register(self.rt.stop_fd, zmq.POLLIN)  # a stop ends the round at once
        putter = RePutter(self.rt.ctx, self.rt.endpoints.own_ingress, lambda: self.rt.stopping)
        flushed = FlushedFollower(self.rt.ctx, self.rt.endpoints.flushed)
        tick_ms = self.rt.config.broker.tick_interval_ms
        next_flush = monotonic_ms() + self.flush_interval_ms
        next_clean = monotonic_ms() + CLEAN_INTERVAL_MS
        woken = unflushed = False  # unflushed: what a flush would write, its deadline one to wake for
        last_notice = 0
        try:
            next_tick = 0
            while not self.rt.stopping:
                now = monotonic_ms()
                found = 0
                if (woken or now >= next_tick) and self.open_store(create=self.queue.exists()):
                    found = self.enqueue()
                if woken or now >= next_tick:
                    # a dropped notice costs at most a tick after a round that found work (or timer files
                    # still to make); past that the files are looked at only by the safety net
                    busy = woken or found > 0 or (self._store is None and self.queue.exists())
                    next_tick = now + (tick_ms if busy else IDLE_TICK_MS)
                opened = self._store is not None
                if opened and wall_ms() >= self.delivery.last_read_ms + self.precision_ms:
                    self.dequeue(putter)
                    unflushed = True
                if opened:  # the progress waits for the flush past its copies, then goes to the mapping
                    self.delivery.stored_end = max(self.delivery.stored_end, putter.stored_end)
                    self.delivery.offer(self.enqueued.next_queue_offset)
                    flushed_end = flushed.drain()
                    self.delivery.on_flushed(flushed_end)
                    self.enqueued.on_flushed(flushed_end)
                unflushed = opened and (unflushed or found > 0)
                if unflushed and monotonic_ms() >= next_flush:
                    next_flush = monotonic_ms() + self.flush_interval_ms
                    self.store.flush(wall_ms(), self.enqueued.take())
                    # states still waiting for the commitlog's flush: another flush of the timer files to come
                    unflushed = bool(len(self.enqueued.gate)) or self.delivery.waiting
                if opened and monotonic_ms() >= next_clean:
                    next_clean = monotonic_ms() + CLEAN_INTERVAL_MS
                    self.clean()
                self.rt.report("running", **self.stats())
                due_in = self.next_slot_in_ms() if opened else IDLE_TICK_MS
                wait_ms = max(0, min(min(next_tick, next_flush if unflushed else next_tick) - monotonic_ms(), due_in))
                gap_ms = last_notice + NOTICE_GAP_MS - monotonic_ms()
                if gap_ms > 0:  # notices wait in the socket meanwhile: a stream of them wakes the loop once a gap
                    time.sleep(max(min(gap_ms, wait_ms), 0) / 1000)
                elif arrived not in self.rt.poll(poller, wait_ms):
                    woken = False
                    continue
                noticed, woken = _drain(arrived)
                if noticed:
                    last_notice = monotonic_ms()
        finally:
            if self._store is not None and self._delivery is not None and self._enqueued is not None:
                # the flush service stops after this actor: the last copies and timer records are synced here first
                delivery, enqueued = self._delivery, self._enqueued
                delivery.stored_end = max(delivery.stored_end, putter.stored_end)
                delivery.offer(enqueued.next_queue_offset)
                enqueued.offer(self._store.log.end_pos)
                flushed_end = max(flushed.drain(), delivery.gate.flushed_end, enqueued.gate.flushed_end)
                file_size = self.config.geometry.commitlog_file_size
                flushed_end = max(flushed_end, sync_commitlog(self.store_dir / "commitlog", file_size, flushed_end,
                                                              max(delivery.stored_end, enqueued.needed_end)))
                enqueued.on_flushed(flushed_end)
                self._store.flush(wall_ms(), enqueued.take())
                delivery.on_flushed(flushed_end)  # behind the enqueue's mark, which counts its records
                self._store.checkpoint.flush(wall_ms())
            self.rt.report("stopped", force=True, **self.stats())
            flushed.close()
            putter.close()
            arrived.close(linger=0)
            self.close()

    def next_slot_in_ms(self) -> int:
        """How long until the first slot holding records is due (T + P), looked for as far as the idle
        safety net: empty slots are passed in one step at a wake, not read one a precision step each."""
        read_ms, now = self.delivery.last_read_ms, wall_ms()
        return self.store.wheel.next_busy(read_ms, max(read_ms, now + IDLE_TICK_MS)) + self.precision_ms - now

    def clean(self) -> None:
        self.commitlog.queue.refresh()
        deleted = self.store.delete_expired(self.commitlog.queue.min_offset)
        if deleted:
            log.info("timer: %d timerlog files deleted below commitlog offset %d", deleted,
                     self.commitlog.queue.min_offset)

    def stats(self) -> dict[str, Any]:
        if self._store is None:
            return {"enqueued": 0, "read_ms": 0, "delivered": self.delivered}
        return {"enqueued": self.enqueued.next_queue_offset, "read_ms": self.delivery.last_read_ms,
                "delivered": self.delivered, "flushed": self.delivery.gate.flushed_end}

    def enqueue(self) -> int:
        """Walk the timer topic's queue into the wheel; how many entries were enqueued."""
        enqueued = self.enqueued
        count = 0
        while True:
            start = enqueued.next_queue_offset
            for queue_offset, record in self.queue.records(start):
                out_ms = record.properties.get(PROP_TIMER_OUT_MS, "")
                if record.phys_offset in self.copied:
                    self.copied.discard(record.phys_offset)
                    log.info("timer: the message at commitlog offset %d was delivered before the restart; "
                             "not enqueued again", record.phys_offset)
                elif out_ms.lstrip("-").isdigit():
                    try:
                        self.store.enqueue(record.phys_offset, record.size, int(out_ms),
                                           record.properties.get(PROP_REAL_TOPIC), wall_ms())
                    except OSError as exc:  # a timerlog file the full disk refused: the next tick tries again
                        log.warning("timer: cannot enqueue (%s); retrying", exc)
                        enqueued.offer(self.store.log.end_pos)
                        return count
                else:
                    log.warning("timer: the message at commitlog offset %d has no TIMER_OUT_MS; skipped",
                                record.phys_offset)
                enqueued.counted(queue_offset + 1, record.phys_offset + record.size)
                count += 1
            if enqueued.next_queue_offset == start:
                if count:  # the checkpoint gets it once the commitlog is flushed past the records
                    enqueued.offer(self.store.log.end_pos)
                return count

    def dequeue(self, putter: RePutter) -> None:
        """Deliver every slot that is due, in time order."""
        checkpoint = self.delivery
        due_end = (wall_ms() - self.precision_ms) // self.precision_ms * self.precision_ms + self.precision_ms
        while checkpoint.last_read_ms < due_end and not self.rt.stopping:
            slot_ms = self.store.wheel.next_busy(checkpoint.last_read_ms, due_end)
            if slot_ms < due_end and not self.deliver_slot(slot_ms, putter):
                checkpoint.last_read_ms = slot_ms
                return  # stopping, or the writer is away: the slot is taken up again
            checkpoint.last_read_ms = min(slot_ms + self.precision_ms, due_end)

    def deliver_slot(self, slot_ms: int, putter: RePutter) -> bool:
        """Put every record of the slot not delivered yet; False when stopping or the writer is away."""
        checkpoint = self.delivery
        delivered_pos = checkpoint.delivered_pos if checkpoint.delivered_slot_ms == slot_ms else -1
        now = wall_ms()
        batch: list[Copy] = []
        size = 0
        for log_pos, timer in self.store.slot_records(slot_ms):
            if log_pos <= delivered_pos or timer.phys_offset in self.already:
                continue
            decoded = self.commitlog.read_record(timer.phys_offset, check_crc=False)
            problem = claim_problem(timer, decoded, self.precision_ms)
            if problem or decoded.record is None:
                log.warning("timer: not the timer message at commitlog offset %d (%s); skipped", timer.phys_offset,
                            problem)
                continue
            copy = copy_of(log_pos, timer, decoded.record, now)
            if copy is None:
                log.warning("timer: the message at commitlog offset %d names no real topic; skipped",
                            timer.phys_offset)
                continue
            batch.append(copy)
            size += len(copy.wire.body)
            if len(batch) >= self.batch_messages or size >= self.batch_bytes:
                if not self._put(slot_ms, batch, putter):
                    return False
                batch, size = [], 0
        return not batch or self._put(slot_ms, batch, putter)

    def _put(self, slot_ms: int, batch: list[Copy], putter: RePutter) -> bool:
        """Put ``batch`` until every copy is done, then record it delivered; False when stopping or
        the writer does not answer (the checkpoint then says where to look for what it stored)."""
        checkpoint = self.delivery
        last_pos = batch[-1].log_pos
        if checkpoint.in_flight_phys >= 0:  # an earlier batch went unanswered: read what it stored, once settled
            if _settled_end(putter) is None:
                return False
            self.already |= copies_since(self.commitlog, checkpoint.in_flight_phys)
            batch = [c for c in batch if c.phys_offset not in self.already]
        written = putter.lower_bound(monotonic_ms())
        if written is None:
            return False
        checkpoint.in_flight_phys = written
        while batch:
            done = putter.put(batch)
            if done is None:  # no answer: what it stored is found by name, the rest goes again
                if self.rt.stopping or _settled_end(putter) is None:
                    return False
                self.already |= copies_since(self.commitlog, written)
                batch = [c for c in batch if c.phys_offset not in self.already]
                continue
            self.delivered += sum(done)
            batch = [c for c, ok in zip(batch, done, strict=True) if not ok]
            if batch:
                if self.rt.stopping:
                    return False
                time.sleep(RETRY_MS / 1000)
        checkpoint.delivered_pos = last_pos
        checkpoint.delivered_slot_ms = slot_ms
        checkpoint.batch_done(written)
        return True


def _settled_end(putter: RePutter) -> int | None:
    """The writer's commitlog end once every send this actor made before has been appended, or None
    when the writer does not answer. Two pings: the writer answers a ping as it reads it and appends
    the sends read in the same round right after, so the second answer comes after that append."""
    if putter.written_end() is None:
        return None
    return putter.written_end()


def _drain(sock: zmq.Socket[Any]) -> tuple[bool, bool]:
    """Read every waiting notice: whether there was any, and whether one says the timer topic's
    queue grew. Under a load of other messages the consume-queue builder publishes a notice a
    round: each costs a look for the topic's name in its bytes, not a decode, and the loop wakes
    for them at most once every ``NOTICE_GAP_MS``."""
    noticed = grew = False
    while True:
        try:
            frames = sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return noticed, grew
        noticed = True
        grew = grew or (len(frames) == 2 and _TOPIC_BYTES in frames[1])
