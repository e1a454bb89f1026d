"""The schedule topic's queues as the scheduler reads them: one per delay level, oldest first.

An entry's tags code is its delivery time (``mqstore.engine.delay.table``); entries of one level are in
store order, so they are due in order. The consume-queue builder owns the files: they are mapped
read-only, and an entry counts only once the record it points at says it is that entry (its topic,
queue and queue offset): a zero or half-written entry at the end is not there yet. An entry whose
record retention removed is skipped, as RocketMQ skips an unreadable one.

A due entry goes back to its real topic as RocketMQ's ``messageTimeUp`` rebuilds it: the original
body, flag, born time and host, reconsume times and properties (``REAL_TOPIC`` and ``REAL_QID`` kept,
``DELAY`` removed, so the writer does not schedule it again), on queue ``REAL_QID`` of topic
``REAL_TOPIC``; the writer stores it as a new record. The copy also carries ``DELAY_OFFSET``
(``level:queue offset`` of its schedule entry), which is how a restart recognises the copies already
made (``mqstore.actors.scheduler.progress``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.batch.record_batch import CLIENT_SYS_FLAGS
from mqstore.engine.config import Geometry
from mqstore.engine.consumequeue.entry import entry_valid
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.delay.table import DelayLevels, schedule_queue_id
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.log.record import (
    PROP_CRC_KEY,
    PROP_DELAY,
    PROP_KEYS,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TAGS,
    SCHEDULE_TOPIC,
    DecodeKind,
    Record,
)
from mqstore.ipc.wire.requests import SendMessage

PROP_DELAY_OFFSET = "DELAY_OFFSET"
READ_ENTRIES = 256  # entries read from a queue at a time


@dataclass(frozen=True, slots=True)
class Due:
    """A schedule entry whose delivery time has come, and its record."""

    level: int
    queue_offset: int
    deliver_ms: int
    record: Record

    @property
    def real(self) -> tuple[str, int] | None:
        """Where it goes: (REAL_TOPIC, REAL_QID), None for a record without them."""
        topic, qid = self.record.properties.get(PROP_REAL_TOPIC), self.record.properties.get(PROP_REAL_QID)
        if not topic or qid is None or not qid.isdigit():
            return None
        return topic, int(qid)


@dataclass(frozen=True, slots=True)
class LevelScan:
    """What one level holds from an offset: the due entries (in order), the offset after the last
    entry looked at, the delivery time of the first one not due (None when the queue ended), and
    the due entries whose records retention removed (skipped)."""

    due: list[Due]
    next_offset: int
    next_due_ms: int | None
    gone: list[int]


class ScheduleQueues:
    def __init__(self, store_dir: Path, geometry: Geometry, levels: DelayLevels,
                 open_files: OpenFiles | None = None) -> None:
        self.levels = levels
        self.commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size, writable=False,
                                        open_files=open_files)
        self.queues = ConsumeQueueStore.open(store_dir / "consumequeue", geometry.cq_entries_per_file, writable=False,
                                             open_files=open_files)

    def close(self) -> None:
        self.queues.close()
        self.commitlog.close()

    def bounds(self, level: int) -> tuple[int, int]:
        """The level's first live and next queue offsets, read off the files."""
        cq = self.queues.get(SCHEDULE_TOPIC, schedule_queue_id(level))
        if cq is None:
            return 0, 0
        return cq.min_queue_offset, cq.scan_valid_end()

    def scan(self, level: int, queue_offset: int, now_ms: int, limit: int) -> LevelScan:
        """Up to ``limit`` due entries of ``level`` from ``queue_offset``."""
        cq = self.queues.get(SCHEDULE_TOPIC, schedule_queue_id(level))
        if cq is None:
            return LevelScan([], queue_offset, None, [])
        cq.queue.refresh()
        self.commitlog.queue.refresh()
        due: list[Due] = []
        gone: list[int] = []
        delay_ms = self.levels.delay_ms(level)
        queue_offset = max(queue_offset, cq.min_queue_offset)
        while len(due) < limit:
            entries = cq.read(queue_offset, min(READ_ENTRIES, limit - len(due)))
            if len(entries) == 0:
                return LevelScan(due, queue_offset, None, gone)
            for phys, size, deliver_ms in zip(entries["phys_offset"].tolist(), entries["size"].tolist(),
                                              entries["tags_code"].tolist(), strict=True):
                if not entry_valid(phys, size):
                    return LevelScan(due, queue_offset, None, gone)  # the queue's end
                if deliver_ms > now_ms + delay_ms:
                    deliver_ms = now_ms  # a clock that went back: due now, as RocketMQ's correctDeliverTimestamp
                if deliver_ms > now_ms:
                    return LevelScan(due, queue_offset, deliver_ms, gone)
                if phys < self.commitlog.min_offset:
                    gone.append(queue_offset)
                else:
                    record = self._record(phys, size, level, queue_offset)
                    if record is None:
                        return LevelScan(due, queue_offset, None, gone)  # not complete yet: looked at again later
                    due.append(Due(level, queue_offset, deliver_ms, record))
                queue_offset += 1
        return LevelScan(due, queue_offset, now_ms, gone)

    def _record(self, phys: int, size: int, level: int, queue_offset: int) -> Record | None:
        decoded = self.commitlog.read_record(phys, check_crc=False)
        record = decoded.record
        if (decoded.kind is not DecodeKind.RECORD or record is None or record.size != size
                or record.topic != SCHEDULE_TOPIC or record.queue_id != schedule_queue_id(level)
                or record.queue_offset != queue_offset):
            return None
        return record


def reput_wire(due: Due) -> SendMessage | None:
    """The ``send`` message that puts a due message on its real topic; None for one without a real topic."""
    real = due.real
    if real is None:
        return None
    record = due.record
    props = {k: v for k, v in record.properties.items() if k not in (PROP_TAGS, PROP_KEYS, PROP_CRC_KEY, PROP_DELAY)}
    props[PROP_DELAY_OFFSET] = f"{due.level}:{due.queue_offset}"
    return SendMessage(topic=real[0], queue=real[1], body=record.body, keys=tuple(record.keys), props=props,
                       flag=record.flag, born_ms=record.born_ms, born_host=(record.born_host.ip, record.born_host.port),
                       reconsume_times=record.reconsume_times, sys_flag=record.sys_flag & CLIENT_SYS_FLAGS,
                       tags=record.tags or None)


def delay_offset_of(properties: dict[str, str]) -> tuple[int, int] | None:
    """(level, queue offset) of a re-put copy's ``DELAY_OFFSET``, None when absent or malformed."""
    value = properties.get(PROP_DELAY_OFFSET)
    if value is None:
        return None
    level, _, offset = value.partition(":")
    if not (level.isdigit() and offset.isdigit()):
        return None
    return int(level), int(offset)
