"""The ``timerlog`` files: RocketMQ 5's TimerLog, a mapped file queue of 52-byte records, one per
timer message enqueued, chained per wheel slot from the newest record back.

    {store}/timerlog/{20-digit first offset}   timer_log_file_size bytes each (RocketMQ: 100 MiB)
    pos  size  field
      0     4  size = 52
      4     8  prev_pos       timerlog offset of the slot's previous record, -1 for its first
     12     4  magic          1 DEFAULT (always) | 2 ROLL | 4 DELETE; valid while 0 <= magic <= 15
     16     8  write_ms       when it was enqueued, rounded down to the precision
     24     4  delta_ms       slot time - write_ms: the slot it sits in (int)
     28     8  phys_offset    commitlog offset of the rmq_sys_wheel_timer record
     36     4  size           that record's size
     40     4  topic hash     Java String.hashCode() of REAL_TOPIC (0 without one)
     44     8  reserved       0

Where a record no longer fits with room for the blank after it, the file ends in RocketMQ's 16-byte
blank (int bytes left, long 0, int 0xCBD43194) and the next record opens the next file. A record's
size field is written last, so a record cut by a kill reads as the end of the log.

Files go oldest first, never the last one, once every record of a file names a commitlog offset
below the commitlog's first one: the timers it held point at deleted messages. RocketMQ
(deleteExpiredFileByOffsetForTimerLog, every 30 s) looks at a file's last record only (at
``last_unit_pos``), which a rolled record, an older message enqueued again, can pass while records
before it still name live messages; here all of them must. A slot whose chain runs into a deleted
file ends there, as a damaged chain does.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mqstore.engine.log.mapped_file import MappedFile
from mqstore.engine.log.mapped_file_queue import MappedFileQueue, infer_file_size
from mqstore.engine.log.record import BLANK_MAGIC
from mqstore.engine.meta.metafile import DirectorySync

RECORD_SIZE = 52
BLANK_SIZE = 16
MAGIC_DEFAULT = 1
MAGIC_ROLL = 2
MAGIC_DELETE = 4
LOG_DIR = "timerlog"
DEFAULT_TIMER_LOG_FILE_SIZE = 100 * 1024 * 1024
_BODY = struct.Struct(">qiqiqiiq")   # the record after its size field
_SIZE = struct.Struct(">i")
_BLANK = struct.Struct(">iqi")


@dataclass(frozen=True, slots=True)
class TimerRecord:
    prev_pos: int
    magic: int
    write_ms: int
    delta_ms: int
    phys_offset: int
    size: int
    topic_hash: int

    @property
    def slot_ms(self) -> int:
        return self.write_ms + self.delta_ms

    @property
    def rolled(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    def encode(self) -> bytes:
        return _SIZE.pack(RECORD_SIZE) + _BODY.pack(self.prev_pos, self.magic, self.write_ms, self.delta_ms,
                                                    self.phys_offset, self.size, self.topic_hash, 0)


def last_unit_pos(file_size: int) -> int:
    """Where a full file's last record starts: the last one that leaves room for the blank."""
    return file_size - (file_size - BLANK_SIZE) % RECORD_SIZE - BLANK_SIZE - RECORD_SIZE


def decode_record(data: bytes | memoryview) -> TimerRecord | None:
    """The record at the start of ``data``, or None where none is (a blank, zeros, a cut record)."""
    if len(data) < RECORD_SIZE or _SIZE.unpack_from(data)[0] != RECORD_SIZE:
        return None
    prev_pos, magic, write_ms, delta_ms, phys_offset, size, topic_hash, _ = _BODY.unpack_from(data, 4)
    if not 0 <= magic <= 15:
        return None
    return TimerRecord(prev_pos, magic, write_ms, delta_ms, phys_offset, size, topic_hash)


class TimerLog:
    def __init__(self, queue: MappedFileQueue) -> None:
        self.queue = queue

    @classmethod
    def open(cls, store_dir: Path, file_size: int) -> TimerLog:
        """The files found keep their own size (a store made with another one is read as it is)."""
        directory = Path(store_dir) / LOG_DIR
        queue = MappedFileQueue.open(directory, infer_file_size(directory) or file_size)
        queue.dir_sync = DirectorySync(Path(store_dir))  # a rolled timerlog file's name before the checkpoint
        return cls(queue)

    def close(self) -> None:
        self.queue.close()

    @property
    def end_pos(self) -> int:
        return self.queue.max_offset

    def append(self, record: TimerRecord) -> int:
        """Write ``record``; its timerlog offset."""
        mf = self.queue.last_file_for_append()
        if mf.free_bytes < RECORD_SIZE + BLANK_SIZE:
            mf.append_blank_tail(_BLANK.pack(mf.free_bytes, 0, BLANK_MAGIC))
            mf = self.queue.last_file_for_append()
        data = record.encode()
        pos = mf.written_pos
        mf.buffer[pos + 4:pos + RECORD_SIZE] = data[4:]
        mf.buffer[pos:pos + 4] = data[:4]  # last: a record is whole once its size is there
        mf.written_pos = mf.committed_pos = pos + RECORD_SIZE
        return mf.file_base + pos

    def read(self, log_pos: int) -> TimerRecord | None:
        mf = self.queue.find(log_pos)
        if mf is None:
            return None
        pos = log_pos - mf.file_base
        return decode_record(mf.buffer[pos:pos + RECORD_SIZE])

    def recover(self, from_pos: int, visit: Callable[[int, TimerRecord], bool]) -> int:
        """Hand every record from the start of the file holding ``from_pos`` to ``visit``, up to the
        first that is not one or that ``visit`` refuses, and cut the log there (a record cut by a
        kill, stale bytes after it, a record naming a message the commitlog lost); the end it leaves."""
        files = self.queue.files
        end = files[0].file_base if files else 0
        index = max(0, min(len(files) - 1, (from_pos - end) // self.queue.file_size)) if files else 0
        for mf in files[index:]:
            pos = 0
            refused = False
            while pos + RECORD_SIZE <= mf.file_size:
                record = decode_record(mf.buffer[pos:pos + RECORD_SIZE])
                if record is None:
                    break
                if not visit(mf.file_base + pos, record):
                    refused = True
                    break
                pos += RECORD_SIZE
            end = mf.file_base + pos
            blank = _BLANK.unpack_from(mf.buffer, pos) if pos + BLANK_SIZE <= mf.file_size else None
            if refused or blank is None or blank[2] != BLANK_MAGIC or blank[0] != mf.file_size - pos:
                break
            end = mf.file_end
        self.queue.truncate_after(end)
        for mf in self.queue.files:
            if mf.file_base <= end < mf.file_end:
                mf.set_positions(end - mf.file_base)
        self.queue.flushed_where = end
        return end

    def delete_expired(self, commitlog_min: int) -> int:
        """Delete the leading files (never the last) whose every record names a commitlog offset below
        ``commitlog_min``; a file with a record that does not read stops the deletion. How many went."""
        count = last_unit_pos(self.queue.file_size) // RECORD_SIZE + 1

        def max_phys(mf: MappedFile) -> int:
            records = np.frombuffer(mf.buffer, dtype=np.uint8, count=count * RECORD_SIZE).reshape(count, RECORD_SIZE)
            if (records[:, :4].copy().view(">i4") != RECORD_SIZE).any():
                return commitlog_min  # not whole: kept
            return int(records[:, 28:36].copy().view(">i8").max())

        return self.queue.delete_expired_by_offset(commitlog_min, max_phys) if commitlog_min > 0 else 0

    def truncate_after(self, log_pos: int) -> None:
        self.queue.truncate_after(log_pos)

    def flush(self) -> int:
        """Flush every file written since the last call; the flushed end."""
        while True:
            before = self.queue.flushed_where
            if self.queue.flush() == before:
                return before
