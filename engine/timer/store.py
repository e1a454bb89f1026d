"""The timer store: the wheel, the log and the checkpoint of one broker, and the rules that join
them (RocketMQ 5's TimerMessageStore, its doEnqueue, its dequeue walk and its recovery), with no
loop and no clock of its own: the timer actor passes ``now_ms`` in.

- ``enqueue``: a timer message's record goes into the slot of its ``TIMER_OUT_MS``; one already
  due goes into the slot being read, so it is delivered next; one further than the roll window
  (``timer_roll_window_slot`` slots) is parked ROLL half a window or a window ahead, to be put on
  the timer topic again then. The record is appended before the slot points at it.
- ``slot_records``: a due slot's records, first enqueued first (the chain from its newest record).
- ``recover``: the log is scanned from the file before its flushed end; each record re-points its
  slot (a kill between the append and the slot leaves the slot behind), the cut tail is dropped
  (and the records naming messages the commitlog does not hold, ``mqstore.engine.timer.claim``),
  slots pointing past the cut are re-pointed, and the commitlog offset of the last record says how
  far the timer topic's queue was enqueued.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.config import StoreConfig
from mqstore.engine.java.jhash import java_hash
from mqstore.engine.timer.checkpoint import TimerCheckpoint
from mqstore.engine.timer.log import MAGIC_DEFAULT, MAGIC_ROLL, RECORD_SIZE, TimerLog, TimerRecord
from mqstore.engine.timer.wheel import TimerWheel


@dataclass(frozen=True, slots=True)
class Placed:
    """Where ``enqueue`` put a record."""

    log_pos: int
    slot_ms: int
    rolled: bool


@dataclass(frozen=True, slots=True)
class EnqueueMark:
    """The enqueue's progress: the next timer-topic queue offset to enqueue, and the timerlog end
    holding every record enqueued before it."""

    next_queue_offset: int
    log_pos: int


class TimerStore:
    def __init__(self, config: StoreConfig, wheel: TimerWheel, log: TimerLog, checkpoint: TimerCheckpoint) -> None:
        self.precision_ms = config.timer_precision_ms
        self.roll_window_ms = config.timer_roll_window_slot * config.timer_precision_ms
        self.wheel = wheel
        self.log = log
        self.checkpoint = checkpoint
        self._wheel_written = False  # since the last flush: an idle store's flush syncs no 38 MB mapping

    @classmethod
    def open(cls, store_dir: Path | str, config: StoreConfig) -> TimerStore:
        store_dir = Path(store_dir)
        wheel = TimerWheel.open(store_dir, config.timer_precision_ms)
        try:
            log = TimerLog.open(store_dir, config.timer_log_file_size)
            try:
                return cls(config, wheel, log, TimerCheckpoint.open(store_dir))
            except BaseException:
                log.close()
                raise
        except BaseException:
            wheel.close()
            raise

    def close(self) -> None:
        self.wheel.close()
        self.log.close()
        self.checkpoint.close()

    def floor(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    # -- enqueue -----------------------------------------------------------------------------------

    def enqueue(self, phys_offset: int, size: int, out_ms: int, real_topic: str | None, now_ms: int) -> Placed:
        """Append the record of the rmq_sys_wheel_timer message at ``phys_offset`` due at ``out_ms``."""
        write_ms = self.floor(now_ms)
        magic = MAGIC_DEFAULT
        target = max(out_ms, self.checkpoint.last_read_ms)
        if out_ms - write_ms >= self.roll_window_ms:
            excess = out_ms - write_ms - self.roll_window_ms
            ahead = self.roll_window_ms // 2 if excess < self.roll_window_ms // 3 else self.roll_window_ms
            target = self.floor(write_ms + ahead)
            magic |= MAGIC_ROLL
        slot = self.wheel.get(target)
        record = TimerRecord(slot.last_pos, magic, write_ms, target - write_ms, phys_offset, size,
                             java_hash(real_topic) if real_topic else 0)
        log_pos = self.log.append(record)
        self._wheel_written = True
        self.wheel.put(target, log_pos if slot.empty else slot.first_pos, log_pos, slot.num + 1, slot.magic)
        return Placed(log_pos, target, bool(magic & MAGIC_ROLL))

    # -- dequeue -----------------------------------------------------------------------------------

    def slot_records(self, slot_ms: int) -> list[tuple[int, TimerRecord]]:
        """The slot's records with their timerlog offsets, in the order they were enqueued."""
        slot = self.wheel.get(slot_ms)
        chain: list[tuple[int, TimerRecord]] = []
        log_pos = slot.last_pos
        while log_pos >= 0 and not slot.empty:
            record = self.log.read(log_pos)
            if record is None or record.slot_ms != slot_ms:
                break  # the chain leaves the slot (a damaged log): what was found is what there is
            chain.append((log_pos, record))
            log_pos = record.prev_pos
        chain.reverse()
        return chain

    # -- recovery ----------------------------------------------------------------------------------

    def recover(self, claimed: Callable[[TimerRecord], bool]) -> int:
        """Revise the wheel from the log and cut the log where its records end: at a torn record, or
        at the first whose message is not the one it names (``claimed``: the kernel wrote the
        timerlog back and a power cut lost the commitlog bytes it points at). Records name commitlog
        offsets in the timer queue's order, so every record after that one is cut too; the queue
        walk enqueues their messages again where the commitlog still holds them. A slot left
        pointing past the cut is re-pointed at its last record before it, or emptied. Returns the
        commitlog offset of the last record (-1 when the log is empty)."""
        last_phys = -1
        firsts: dict[int, int] = {}  # slot time -> its first record scanned

        def revise(log_pos: int, record: TimerRecord) -> bool:
            nonlocal last_phys
            if not claimed(record):
                return False
            last_phys = record.phys_offset
            if record.slot_ms < self.checkpoint.last_read_ms:
                return True  # delivered: its ring index may hold a later slot now
            slot = self.wheel.get(record.slot_ms)
            firsts.setdefault(record.slot_ms, log_pos)
            if slot.empty:
                self.wheel.put(record.slot_ms, log_pos, log_pos, 1)
            else:  # the last record scanned is the newest: a last_pos past it was cut off
                self.wheel.put(record.slot_ms, slot.first_pos, log_pos, slot.num + (log_pos > slot.last_pos),
                               slot.magic)
            return True

        from_pos = max(0, self.checkpoint.log_flushed_pos - self.log.queue.file_size)
        end = self.log.recover(from_pos, revise)
        for slot_ms in self.wheel.pointing_past(end, self.checkpoint.last_read_ms):
            slot = self.wheel.get(slot_ms)
            if slot_ms in firsts:
                self.wheel.put(slot_ms, min(slot.first_pos, firsts[slot_ms]), slot.last_pos, slot.num, slot.magic)
            else:
                self._repoint(slot_ms, slot.first_pos, end)
        self.checkpoint.log_flushed_pos = min(self.checkpoint.log_flushed_pos, end)
        self._wheel_written = True
        return last_phys

    def _repoint(self, slot_ms: int, first_pos: int, end: int) -> None:
        """Point the slot at its last record in [first_pos, end), found by reading forward from its
        first (RocketMQ's recovery re-scans from a slot's firstPos); empty it when none is there."""
        file_size = self.log.queue.file_size
        last, num, log_pos = -1, 0, first_pos
        while 0 <= log_pos < end:
            record = self.log.read(log_pos)
            if record is None:  # a file's blank: the next record opens the next file
                log_pos += file_size - log_pos % file_size
                continue
            if record.slot_ms == slot_ms:
                last, num = log_pos, num + 1
            log_pos += RECORD_SIZE
        if last < 0:
            self.wheel.clear(slot_ms)
        else:
            self.wheel.put(slot_ms, first_pos, last, num)

    def delete_expired(self, commitlog_min: int) -> int:
        """Drop the timerlog files that only name commitlog records below ``commitlog_min``."""
        return self.log.delete_expired(commitlog_min)

    def flush(self, now_ms: int, enqueued: EnqueueMark | None = None) -> None:
        """Log, wheel, then the checkpoint (RocketMQ's order). ``enqueued``, the enqueue's progress
        once the commitlog is durable past the records it counts, reaches the checkpoint's mapping
        only here, behind the log and wheel flush that make the records it counts durable."""
        log_end = self.log.flush()
        if self._wheel_written:
            self.wheel.flush()
            self._wheel_written = False
        if enqueued is not None:
            self.checkpoint.next_queue_offset = enqueued.next_queue_offset
            self.checkpoint.log_flushed_pos = min(enqueued.log_pos, log_end)
        self.checkpoint.flush(now_ms)
