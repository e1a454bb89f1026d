"""``config/timercheck``: RocketMQ 5's TimerCheckpoint, a mapped 4096-byte file, big-endian longs.

    pos  size  field
      0     8  last_read_ms            the slot time the dequeue works on: every slot before it is delivered
      8     8  log_flushed_pos         timerlog offset flushed to disk (recovery scans from the file before it)
     16     8  next_queue_offset       next rmq_sys_wheel_timer consume-queue offset to enqueue
     24     8  master_queue_offset     RocketMQ's (slaves); mqstore writes next_queue_offset
     32    24  data version            state version, timestamp, counter (newer RocketMQ)
    --- mqstore's, after RocketMQ's fields (RocketMQ reads none of them) ---
     64     8  delivered_slot_ms       the slot the two fields below are about
     72     8  delivered_pos           its records at or before this timerlog offset are delivered
     80     8  in_flight_phys          -1, or the commitlog end before the re-put batch now in flight

The fields are stores into the mapping, so a killed actor leaves them as they were written (the
page cache keeps them); ``flush`` makes them durable.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from mqstore.engine.meta.metafile import fsync_dir, make_dirs

CHECKPOINT_FILE = "config/timercheck"
CHECKPOINT_SIZE = 4096
_LONG = struct.Struct(">q")


class _Field:
    """One long of the mapping, read and written in place."""

    def __init__(self, pos: int) -> None:
        self.pos = pos

    def __get__(self, checkpoint: TimerCheckpoint, owner: type | None = None) -> int:
        return int(_LONG.unpack_from(checkpoint.buffer, self.pos)[0])

    def __set__(self, checkpoint: TimerCheckpoint, value: int) -> None:
        _LONG.pack_into(checkpoint.buffer, self.pos, value)


class TimerCheckpoint:
    def __init__(self, path: Path, fd: int, mm: mmap.mmap, created: bool) -> None:
        self.path = path
        self._fd = fd
        self._mm = mm
        self.created = created  # a new file: nothing was ever enqueued or delivered

    @classmethod
    def open(cls, store_dir: Path) -> TimerCheckpoint:
        path = Path(store_dir) / CHECKPOINT_FILE
        make_dirs(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            created = os.fstat(fd).st_size == 0
            if os.fstat(fd).st_size < CHECKPOINT_SIZE:
                os.posix_fallocate(fd, 0, CHECKPOINT_SIZE)
                fsync_dir(path.parent)  # its name, before any flush counts the progress in it durable
            mm = mmap.mmap(fd, CHECKPOINT_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        checkpoint = cls(path, fd, mm, created)
        if created:
            checkpoint.delivered_pos = checkpoint.in_flight_phys = checkpoint.delivered_slot_ms = -1
        return checkpoint

    last_read_ms = _Field(0)
    log_flushed_pos = _Field(8)
    next_queue_offset = _Field(16)
    master_queue_offset = _Field(24)
    timestamp = _Field(40)
    counter = _Field(48)
    delivered_slot_ms = _Field(64)
    delivered_pos = _Field(72)
    in_flight_phys = _Field(80)

    @property
    def buffer(self) -> mmap.mmap:
        return self._mm

    def flush(self, now_ms: int) -> None:
        self.master_queue_offset = self.next_queue_offset
        self.timestamp = now_ms
        self.counter += 1
        self._mm.flush()

    def close(self) -> None:
        if self._fd >= 0:
            self._mm.close()
            os.close(self._fd)
            self._fd = -1
