"""The ``timerwheel`` file: RocketMQ 5's TimerWheel, one slot per precision step, a ring of
``WHEEL_SLOT_COUNT`` slots whatever the precision (two weeks at 1000 ms).

    {store}/timerwheel   WHEEL_SLOT_COUNT x 32-byte slots = 38,707,200 bytes, big-endian
    pos  size  field
      0     8  slot time in units of the precision (time_ms // precision_ms)
      8     8  first_pos   timerlog offset of the slot's first record
     16     8  last_pos    timerlog offset of its newest record: the chain walks back from here
     24     4  num         records in the slot
     28     4  magic       unused, kept as written

A slot sits at index ``(time_ms // precision_ms) % WHEEL_SLOT_COUNT``; one whose stored time is not
the time asked for is empty (a slot of the ring's previous turn, or never written).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.metafile import fsync_dir

SLOT_SIZE = 32
SLOTS_TOTAL = 7 * 86_400                 # RocketMQ's slotsTotal: TIMER_WHEEL_TTL_DAY x seconds a day
WHEEL_SLOT_COUNT = 2 * SLOTS_TOTAL
WHEEL_FILE_SIZE = WHEEL_SLOT_COUNT * SLOT_SIZE
WHEEL_FILE = "timerwheel"
_SLOT = struct.Struct(">qqqii")
_SLOT_TIMES = np.dtype([("time", ">i8"), ("rest", "V24")])
_SLOTS = np.dtype([("time", ">i8"), ("first", ">i8"), ("last", ">i8"), ("rest", "V8")])


class TimerWheelError(MqstoreError, OSError):
    """The wheel file has another size than RocketMQ's."""


@dataclass(frozen=True, slots=True)
class Slot:
    time_ms: int      # -1 for an empty slot
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0

    @property
    def empty(self) -> bool:
        return self.time_ms < 0


EMPTY_SLOT = Slot(-1, -1, -1)


class TimerWheel:
    def __init__(self, path: Path, precision_ms: int, fd: int, mm: mmap.mmap) -> None:
        self.path = path
        self.precision_ms = precision_ms
        self._fd = fd
        self._mm = mm

    @classmethod
    def open(cls, store_dir: Path, precision_ms: int) -> TimerWheel:
        """Map ``{store}/timerwheel``, allocating it (all slots empty) when it is missing."""
        path = Path(store_dir) / WHEEL_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                os.posix_fallocate(fd, 0, WHEEL_FILE_SIZE)
                fsync_dir(path.parent)  # its name, before any flush counts the slots in it durable
            elif size != WHEEL_FILE_SIZE:
                raise TimerWheelError(f"{path}: {size} bytes, a timer wheel has {WHEEL_FILE_SIZE}")
            mm = mmap.mmap(fd, WHEEL_FILE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, precision_ms, fd, mm)

    def close(self) -> None:
        if self._fd >= 0:
            self._mm.close()
            os.close(self._fd)
            self._fd = -1

    def index(self, time_ms: int) -> int:
        return (time_ms // self.precision_ms) % WHEEL_SLOT_COUNT

    def get(self, time_ms: int) -> Slot:
        stored, first, last, num, magic = _SLOT.unpack_from(self._mm, self.index(time_ms) * SLOT_SIZE)
        if stored != time_ms // self.precision_ms:
            return EMPTY_SLOT
        return Slot(time_ms, first, last, num, magic)

    def put(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int = 0) -> None:
        _SLOT.pack_into(self._mm, self.index(time_ms) * SLOT_SIZE, time_ms // self.precision_ms, first_pos,
                        last_pos, num, magic)

    def clear(self, time_ms: int) -> None:
        """Empty the slot of ``time_ms``."""
        _SLOT.pack_into(self._mm, self.index(time_ms) * SLOT_SIZE, -1, -1, -1, 0, 0)

    def pointing_past(self, end_pos: int, from_ms: int) -> list[int]:
        """The times of the slots at or after ``from_ms`` whose first or last record offset is at or
        past timerlog offset ``end_pos``: records a recovery cut off."""
        view: Any = np.frombuffer(self._mm, _SLOTS, count=WHEEL_SLOT_COUNT)
        hits = np.flatnonzero((view["time"] >= from_ms // self.precision_ms)
                              & ((view["first"] >= end_pos) | (view["last"] >= end_pos)))
        times = [int(t) * self.precision_ms for t in view["time"][hits]]
        del view
        return times

    def next_busy(self, from_ms: int, to_ms: int) -> int:
        """The first slot time in [from_ms, to_ms) whose slot holds records, else ``to_ms``: a
        catch-up over empty slots is one array comparison, not one read a slot."""
        step = self.precision_ms
        first, count = from_ms // step, max(0, (to_ms - from_ms + step - 1) // step)
        while count > 0:
            start = first % WHEEL_SLOT_COUNT
            run = min(count, WHEEL_SLOT_COUNT - start)
            view: Any = np.frombuffer(self._mm, _SLOT_TIMES, count=run, offset=start * SLOT_SIZE)
            hits = np.flatnonzero(view["time"] == np.arange(first, first + run, dtype=np.int64))
            del view
            if len(hits):
                return int(first + hits[0]) * step
            first += run
            count -= run
        return to_ms

    def flush(self) -> None:
        self._mm.flush()
