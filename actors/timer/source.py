"""The timer topic's consume queue as the timer actor reads it: ``rmq_sys_wheel_timer`` queue 0,
mapped read-only from the consume-queue builder's files, with each entry's commitlog record.

A read-only mapping shows zeros past the builder's end, and the builder may be writing the entry
being read, so an entry counts only once the record it points at is there: the timer topic's, at
that queue offset. Entries are in commitlog order, which lets recovery find the entry of a commitlog
offset by bisection.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mqstore.engine.consumequeue.consume_queue import ConsumeQueue
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import DecodeKind, Record
from mqstore.engine.timer.put_rule import TIMER_TOPIC

READ_ENTRIES = 1024


class TimerQueue:
    def __init__(self, store_dir: Path, entries_per_file: int, commitlog: CommitLog) -> None:
        self.root = store_dir / "consumequeue"
        self.entries_per_file = entries_per_file
        self.commitlog = commitlog
        self.cq: ConsumeQueue | None = None

    def close(self) -> None:
        if self.cq is not None:
            self.cq.close()

    def exists(self) -> bool:
        """Whether a timer message was ever stored: the consume-queue builder made the queue."""
        return self.cq is not None or (self.root / TIMER_TOPIC / "0").is_dir()

    def _queue(self) -> ConsumeQueue | None:
        if self.cq is None and (self.root / TIMER_TOPIC / "0").is_dir():
            self.cq = ConsumeQueue.open(self.root, TIMER_TOPIC, 0, self.entries_per_file, writable=False)
        if self.cq is not None:
            self.cq.queue.refresh()
        return self.cq

    @property
    def min_queue_offset(self) -> int:
        cq = self._queue()
        return cq.min_queue_offset if cq is not None else 0

    def records(self, queue_offset: int, max_count: int = READ_ENTRIES) -> Iterator[tuple[int, Record]]:
        """The entries from ``queue_offset`` on that are really there, with their records."""
        cq = self._queue()
        if cq is None:
            return
        self.commitlog.queue.refresh()
        queue_offset = max(queue_offset, cq.min_queue_offset)  # retention took the entries before it
        entries = cq.read(queue_offset, max_count)
        for i, (phys_offset, size, _) in enumerate(entries.tolist()):
            record = self._record(phys_offset, size, queue_offset + i)
            if record is None:
                return
            yield queue_offset + i, record

    def _record(self, phys_offset: int, size: int, queue_offset: int) -> Record | None:
        if phys_offset < 0 or size <= 0:
            return None
        decoded = self.commitlog.read_record(phys_offset, check_crc=False)
        record = decoded.record
        if (decoded.kind is not DecodeKind.RECORD or record is None or record.size != size
                or record.topic != TIMER_TOPIC or record.queue_offset != queue_offset):
            return None
        return record

    def record_at(self, phys_offset: int) -> Record | None:
        """The timer topic's record at ``phys_offset``, if the commitlog holds one there."""
        self.commitlog.queue.refresh()
        decoded = self.commitlog.read_record(phys_offset, check_crc=False, read_body=False)
        record = decoded.record
        return record if decoded.kind is DecodeKind.RECORD and record is not None and record.topic == TIMER_TOPIC \
            else None

    def _phys_at(self, cq: ConsumeQueue, queue_offset: int) -> int | None:
        entry = cq.entry(queue_offset)
        return entry[0] if entry is not None and entry[1] > 0 else None

    def _end(self, cq: ConsumeQueue) -> tuple[int, int]:
        """A range [lo, hi] holding the queue offset past the last entry written (gallop)."""
        lo = hi = cq.min_queue_offset
        step = 1
        while self._phys_at(cq, hi) is not None:
            lo, hi = hi, hi + step
            step *= 2
        return lo, hi

    def end_queue_offset(self) -> int:
        """The queue offset past the last entry written: where the writer's next send goes."""
        cq = self._queue()
        if cq is None:
            return 0
        lo, hi = self._end(cq)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._phys_at(cq, mid) is not None:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def queue_offset_of(self, phys_offset: int) -> int | None:
        """The queue offset of the entry pointing at ``phys_offset``, if the queue holds one."""
        cq = self._queue()
        if cq is None:
            return None
        lo, hi = self._end(cq)
        while lo < hi:  # the first entry at or past phys_offset
            mid = (lo + hi) // 2
            found = self._phys_at(cq, mid)
            if found is not None and found < phys_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo if self._phys_at(cq, lo) == phys_offset else None
