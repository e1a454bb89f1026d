"""ConsumeQueue: per (topic, queue id), one 20-byte entry per message, in queue-offset order.

The entry's bytes and what an entry says (valid, a filler, live) are ``entry``'s; this module is one
queue's files: append in order, read, find the end of the valid entries, recover, truncate, and
delete what retention took. 300,000 entries per file by default.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from mqstore.engine.consumequeue.entry import (
    CQ_DTYPE,
    CQ_ENTRY_SIZE,
    ENTRY,
    FILLER_SIZE,
    CqEntries,
    decode_entry,
    encode_entry,
    entry_live,
    entry_valid,
    valid_prefix,
)
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.mapped_file import MappedFile
from mqstore.engine.log.mapped_file_queue import MappedFileQueue
from mqstore.engine.log.open_files import OpenFiles

DEFAULT_CQ_ENTRIES_PER_FILE = 300_000


class QueueView(Protocol):
    """What the read paths need of a queue: a ConsumeQueue, or a reader's view of one cut at what
    its builder has published."""

    @property
    def min_queue_offset(self) -> int: ...

    @property
    def max_queue_offset(self) -> int: ...

    @property
    def entries_per_file(self) -> int: ...

    def read(self, queue_offset: int, max_count: int) -> CqEntries: ...


def cq_file_size(entries_per_file: int) -> int:
    return entries_per_file * CQ_ENTRY_SIZE


def _file_entries(mf: MappedFile, count: int | None = None) -> CqEntries:
    """A copy of the file's entries (copies, so no view outlives the mapping)."""
    n = mf.file_size // CQ_ENTRY_SIZE if count is None else count
    return np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=n).copy()


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, queue: MappedFileQueue) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.queue = queue
        self.min_logic_pos = 0  # byte offset of the first valid entry
        self.max_phys_end = -1  # max (phys_offset + size) of the entries written

    @classmethod
    def open(cls, root: Path | str, topic: str, queue_id: int,
             entries_per_file: int = DEFAULT_CQ_ENTRIES_PER_FILE, *, writable: bool = True,
             open_files: OpenFiles | None = None) -> ConsumeQueue:
        directory = Path(root) / topic / str(queue_id)
        cq = cls(topic, queue_id, MappedFileQueue.open(directory, cq_file_size(entries_per_file),
                                                       writable=writable, open_files=open_files))
        if cq.queue.files:
            cq.min_logic_pos = cq.queue.min_offset
        return cq

    def close(self) -> None:
        self.queue.close()

    @property
    def entries_per_file(self) -> int:
        return self.queue.file_size // CQ_ENTRY_SIZE

    @property
    def min_queue_offset(self) -> int:
        return self.min_logic_pos // CQ_ENTRY_SIZE

    @property
    def max_queue_offset(self) -> int:
        """The next queue offset to be written."""
        return self.queue.max_offset // CQ_ENTRY_SIZE

    def flush(self, least_pages: int = 0) -> int:
        return self.queue.flush(least_pages)

    # -- write -------------------------------------------------------------------------------------

    def append(self, queue_offset: int, phys_offset: int, size: int, tags_code: int, *,
               expired_below: int = -1) -> bool:
        """Write the entry for ``queue_offset``. A record already covered (dispatched again after a
        restart) is accepted without a second entry. Entries missing before it are a gap, an error,
        unless retention took their records first: the queue's last entry lies below
        ``expired_below`` (the commitlog's min offset), and the gap is filled with filler entries,
        below the queue's min offset once it is corrected."""
        if self.max_phys_end >= 0 and phys_offset + size <= self.max_phys_end:
            return True
        expect_pos = queue_offset * CQ_ENTRY_SIZE
        was_empty = not self.queue.files
        mf = self.queue.last_file_for_append(expect_pos)
        if was_empty:
            # A queue that starts past offset 0 (rebuilt after retention) keeps fillers below its min.
            mf = self._fill_to(mf.file_base, expect_pos)
            self.min_logic_pos = expect_pos
        current = mf.file_base + mf.written_pos
        if expect_pos < current:
            return True
        if expect_pos != current and expired_below > 0 and self.max_phys_end <= expired_below:
            mf = self._fill_to(current, expect_pos)
            current = expect_pos
        if expect_pos != current:
            raise ConsumeQueueOrderError(
                f"{self.topic}/{self.queue_id}: entry for queue offset {queue_offset} would land at "
                f"{current // CQ_ENTRY_SIZE}")
        mf.append(encode_entry(phys_offset, size, tags_code))
        self.max_phys_end = phys_offset + size
        return True

    def _fill_to(self, pos: int, end_pos: int) -> MappedFile:
        """Filler entries in [pos, end_pos), across files as needed; returns the file for ``end_pos``."""
        while pos < end_pos:
            mf = self.queue.last_file_for_append(pos)
            count = min(mf.free_bytes, end_pos - pos) // CQ_ENTRY_SIZE
            mf.append(encode_entry(0, FILLER_SIZE, 0) * count)
            pos += count * CQ_ENTRY_SIZE
        return self.queue.last_file_for_append(end_pos)

    def append_entries(self, queue_offsets: npt.NDArray[np.int64], entries: CqEntries, *,
                       expired_below: int = -1, span: tuple[int, int, int, int] | None = None) -> None:
        """``append`` for consecutive entries of one batch: one copy while they fall in the current
        file and follow its end; anything else (a repeat, a new file, a gap) goes entry by entry.
        ``span``, when the caller knows it (``mqstore.engine._native.cq_entries``): the first entry's queue
        offset, the last one's + 1, the first one's phys offset and the last one's phys end, so a
        batch that wholly continues the last file is one copy with no numpy call."""
        if span is not None:
            first_queue_offset, end_queue_offset, first_phys, phys_end = span
            mf = self.queue.files[-1] if self.queue.files else None
            count = end_queue_offset - first_queue_offset
            if (mf is not None and mf.file_base + mf.written_pos == first_queue_offset * CQ_ENTRY_SIZE
                    and first_phys >= self.max_phys_end and count == len(entries)
                    and count * CQ_ENTRY_SIZE <= mf.free_bytes and phys_end >= 0):  # < 0: a sum that wrapped
                mf.append(memoryview(entries).cast("B"))  # type: ignore[arg-type]  # numpy's stubs lack Buffer
                self.max_phys_end = phys_end
                return
        index = 0
        while index < len(entries):
            mf = self.queue.files[-1] if self.queue.files else None
            first = int(queue_offsets[index])
            if (mf is None or mf.file_base + mf.written_pos != first * CQ_ENTRY_SIZE
                    or int(entries["phys_offset"][index]) < self.max_phys_end):
                phys, size, tags = entries[index].tolist()
                self.append(first, phys, size, tags, expired_below=expired_below)
                index += 1
                continue
            room = mf.free_bytes // CQ_ENTRY_SIZE
            run = min(room, len(entries) - index)
            if run == 0 or int(queue_offsets[index + run - 1]) != first + run - 1:
                phys, size, tags = entries[index].tolist()
                self.append(first, phys, size, tags, expired_below=expired_below)
                index += 1
                continue
            chunk = entries[index:index + run]
            mf.append(chunk.tobytes())
            self.max_phys_end = int(chunk["phys_offset"][-1]) + int(chunk["size"][-1])
            index += run

    # -- read --------------------------------------------------------------------------------------

    def read(self, queue_offset: int, max_count: int) -> CqEntries:
        """Up to ``max_count`` entries from ``queue_offset`` (copies), crossing files as needed."""
        out: list[CqEntries] = []
        end = min(self.max_queue_offset, queue_offset + max_count)
        qo = max(queue_offset, self.min_queue_offset)
        while qo < end:
            mf = self.queue.find(qo * CQ_ENTRY_SIZE)
            if mf is None:
                break
            first = (qo * CQ_ENTRY_SIZE - mf.file_base) // CQ_ENTRY_SIZE
            last = min(mf.written_pos // CQ_ENTRY_SIZE, first + end - qo)
            if last <= first:
                break
            view = np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=last - first, offset=first * CQ_ENTRY_SIZE)
            out.append(view.copy())
            del view
            qo += last - first
        if len(out) == 1:  # most reads (a pull's) stay in one file: its copy is the answer, not copied again
            return out[0]
        # concatenate answers in native byte order: back to the file's big-endian columns
        return np.concatenate(out).astype(CQ_DTYPE, copy=False) if out else np.empty(0, dtype=CQ_DTYPE)

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        entries = self.read(queue_offset, 1)
        if len(entries) == 0 or queue_offset < self.min_queue_offset:
            return None
        row = entries[0]
        return int(row["phys_offset"]), int(row["size"]), int(row["tags_code"])

    def scan_valid_end(self) -> int:
        """The queue offset after the last valid entry, read off the files without trusting any
        cursor: how a reader in another process learns how far the builder got."""
        self.queue.refresh()
        for mf in reversed(self.queue.files):
            n_valid = valid_prefix(_file_entries(mf))
            if n_valid:
                return (mf.file_base + n_valid * CQ_ENTRY_SIZE) // CQ_ENTRY_SIZE
        return self.min_queue_offset

    def searched_valid_end(self) -> int:
        """``scan_valid_end`` by binary search: the builder appends in order into zeroed files, so
        each file's valid entries are a prefix of it; log n entry reads instead of a copy of the
        last file, for a process that asks often (``mqstore.engine.reclaim.consumed``)."""
        self.queue.refresh()
        for mf in reversed(self.queue.files):
            lo, hi = 0, mf.file_size // CQ_ENTRY_SIZE
            while lo < hi:
                mid = (lo + hi) // 2
                phys_offset, size, _ = ENTRY.unpack_from(mf.buffer, mid * CQ_ENTRY_SIZE)
                if entry_valid(phys_offset, size):
                    lo = mid + 1
                else:
                    hi = mid
            if lo:
                return (mf.file_base + lo * CQ_ENTRY_SIZE) // CQ_ENTRY_SIZE
        return self.min_queue_offset

    def last_phys_end(self) -> int:
        """``phys_offset + size`` of the last entry, -1 for an empty queue."""
        end = self.queue.max_offset
        if end < CQ_ENTRY_SIZE:
            return -1
        # the last file may be empty (cut at a file start, or created just before a crash)
        mf = self.queue.find(end - CQ_ENTRY_SIZE)
        if mf is None:
            return -1
        phys_offset, size, _ = decode_entry(mf.read(end - CQ_ENTRY_SIZE - mf.file_base, CQ_ENTRY_SIZE))
        return phys_offset + size

    # -- recovery ----------------------------------------------------------------------------------

    def recover(self) -> None:
        """Find the end of the valid entries in the last three files and cut everything after it."""
        files = self.queue.files
        if not files:
            self.max_phys_end = -1
            return
        end = files[max(0, len(files) - 3)].file_base
        for mf in files[max(0, len(files) - 3):]:
            entries = _file_entries(mf)
            n_valid = valid_prefix(entries)
            end = mf.file_base + n_valid * CQ_ENTRY_SIZE
            if n_valid < len(entries):
                break
        self.queue.truncate_after(end)
        self.queue.flushed_where = end
        self.max_phys_end = self.last_phys_end()
        self.min_logic_pos = max(self.min_logic_pos, self.queue.min_offset)

    def truncate_dirty(self, phys_offset: int) -> None:
        """Drop entries whose record starts at or after ``phys_offset`` (the commitlog's new end)."""
        while self.queue.files:
            last = self.queue.files[-1]
            entries = _file_entries(last, last.written_pos // CQ_ENTRY_SIZE)
            keep = int(np.searchsorted(entries["phys_offset"], phys_offset, side="left")) \
                if len(entries) else 0
            n_valid = min(keep, valid_prefix(entries))
            if n_valid == 0 and len(self.queue.files) > 1 and last.file_base > self.min_logic_pos:
                self.queue.files.pop()
                last.delete()
                self.queue.flushed_where = min(self.queue.flushed_where, self.queue.max_offset)
                continue
            if n_valid < last.written_pos // CQ_ENTRY_SIZE:
                self.queue.truncate_after(last.file_base + n_valid * CQ_ENTRY_SIZE)
            break
        self.max_phys_end = self.last_phys_end()

    def truncate_from(self, queue_offset: int) -> None:
        """Drop the entry at ``queue_offset`` and every later one."""
        self.queue.truncate_after(max(queue_offset, self.min_queue_offset) * CQ_ENTRY_SIZE)
        self.max_phys_end = self.last_phys_end()

    def correct_min_offset(self, min_phys_offset: int) -> None:
        """After commitlog files were deleted: the min offset becomes the first entry whose record
        still exists (fillers never count)."""
        if self.min_queue_offset >= self.max_queue_offset:
            return
        entries = self.read(self.min_queue_offset, self.max_queue_offset - self.min_queue_offset)
        live = entry_live(entries["phys_offset"], entries["size"], min_phys_offset)
        if bool(live.any()):
            self.min_logic_pos += int(np.argmax(live)) * CQ_ENTRY_SIZE
        else:
            self.min_logic_pos = self.queue.max_offset

    def delete_expired(self, min_phys_offset: int) -> int:
        """Delete leading files whose every record is gone from the commitlog, then fix the min."""
        def last_unit_phys(mf: MappedFile) -> int:
            return decode_entry(mf.read(mf.file_size - CQ_ENTRY_SIZE, CQ_ENTRY_SIZE))[0]

        deleted = self.queue.delete_expired_by_offset(min_phys_offset, last_unit_phys)
        self.min_logic_pos = max(self.min_logic_pos, self.queue.min_offset)
        self.correct_min_offset(min_phys_offset)
        return deleted

    # -- time --------------------------------------------------------------------------------------

    def queue_offset_by_time(self, ts_ms: int, store_ms_at: Callable[[int], int], *, upper: bool = False) -> int:
        return queue_offset_by_time(self, ts_ms, store_ms_at, upper=upper)


class ConsumeQueueOrderError(MqstoreError, RuntimeError):
    """An entry would be written at a position other than its queue offset: the dispatcher is broken."""


def queue_offset_by_time(view: QueueView, ts_ms: int, store_ms_at: Callable[[int], int], *, upper: bool = False) -> int:
    """LOWER (default): the first offset whose store time is >= ``ts_ms`` (max offset if none).
    UPPER: the last offset whose store time is <= ``ts_ms``. Clamped to [min, max]."""
    lo, hi = view.min_queue_offset, view.max_queue_offset
    if lo >= hi:
        return lo
    entries = view.read(lo, hi - lo)
    phys = entries["phys_offset"]

    def time_at(i: int) -> int:
        t = store_ms_at(int(phys[i]))
        return -1 if t < 0 else t  # a record already deleted reads as "too early"

    left, right = 0, len(entries)
    while left < right:
        mid = (left + right) // 2
        if (time_at(mid) <= ts_ms) if upper else (time_at(mid) < ts_ms):
            left = mid + 1
        else:
            right = mid
    result = lo + left - 1 if upper else lo + left
    return min(max(result, view.min_queue_offset), view.max_queue_offset)
