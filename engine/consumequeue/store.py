"""Every consume queue of a store, under ``{store}/consumequeue/{topic}/{queueId}/``.

A batch of dispatch rows is written queue by queue (one copy per queue, not one call per row), so
while it is being written the queues are not a prefix of the commitlog: a queue later in the batch
may lack rows that an earlier queue already holds past them. A process that dies there would resume
from the furthest entry and leave that queue a gap for good. So a batch touching several queues
first records where it starts in ``consumequeue/.dispatching`` (8 bytes, little-endian), removed
once every queue holds the batch, and ``applied_end`` resumes from there: the batch is dispatched
again, and what its first try wrote is skipped as already covered. The mark needs no fsync: it guards against
the writing process dying, whose stores the page cache keeps; after a power cut, abnormal recovery
starts from the checkpoint, before any batch that was in flight. So the mark is a mapped 8-byte file,
set and cleared (to ``NO_BATCH``) by a store into the mapping, not made and removed by syscalls each
batch (26 us a batch, a round's largest fixed cost); a clean close removes a cleared mark.

A deleted topic (``delete_topic``) takes its queues' entries with it, and with them maybe the
furthest byte any queue covered: dispatch would resume below it and make the topic again from its
old records. So the deletion records how far the queues were applied, ``consumequeue/.applied_floor``
(8 bytes, little-endian), and ``applied_end`` never resumes below it. An abnormal recovery still
re-dispatches from its checkpoint, as RocketMQ's does. The floor is written whole and durably (a
renamed file, its directory fsynced) before the topic goes: a power cut that kept the removal and
lost the floor would let a normal start dispatch the topic again.

The topic's directory is first renamed to a name no topic has (``.deleted-{topic}``) and the
renaming made durable, then removed: a power cut during the removal keeps any subset of its
unlinks, and a queue with some of its files back and others gone is one ``open`` refuses (files
not adjacent). A leftover is removed at the next writable open.
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.engine import _native
from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS, DispatchRequest
from mqstore.engine.consumequeue.consume_queue import DEFAULT_CQ_ENTRIES_PER_FILE, ConsumeQueue
from mqstore.engine.consumequeue.entry import CQ_DTYPE
from mqstore.engine.log.mapped_file_queue import is_queue_file_name
from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.meta.metafile import DirectorySync, fsync_dir, write_atomic

DISPATCHING_NAME = ".dispatching"  # where the batch being written starts (a file: never a topic)
FLOOR_NAME = ".applied_floor"      # every record below it is applied, or was a deleted topic's
DELETED_PREFIX = ".deleted-"       # a deleted topic's directory while it is removed
_MARK = struct.Struct("<q")
NO_BATCH = -1
_CLEARED = _MARK.pack(NO_BATCH)
# a queue's row of QueueEntries.queues: topic code, queue id, its entries [first, end), its first entry's
# queue offset and its last's + 1, its first entry's phys offset and its last's phys offset + size
QueueRun = list[int]
QUEUE_FIELDS = 8


@dataclass(frozen=True, slots=True)
class QueueEntries:
    """The consume-queue entries of a batch of dispatch rows, queue by queue: ``entries`` (``CQ_DTYPE``)
    and their ``queue_offsets``, and a row of ``queues`` per queue, in ascending (topic << 32 | queue_id)
    order (commitlog order within each): its topic code, queue id, entries ``[first, end)``, the queue
    offset of its first entry and the one after its last, its first entry's phys offset and the
    commitlog byte after its last entry's record (``QueueRun``). One kernel call
    (``mqstore.engine._native.cq_entries``)."""

    entries: np.ndarray[Any, Any]
    queue_offsets: np.ndarray[Any, Any]
    queues: list[QueueRun]
    min_phys_offset: int

    @classmethod
    def of(cls, rows: np.ndarray[Any, Any]) -> QueueEntries:
        if rows.dtype != DISPATCH_COLUMNS:
            raise ValueError(f"dispatch rows are {rows.dtype}, not DISPATCH_COLUMNS")
        n = len(rows)
        entries = np.empty(n, CQ_DTYPE)
        queue_offsets = np.empty(n, np.int64)
        queues = np.empty((n, QUEUE_FIELDS), np.int64)
        count, entry_count, min_phys = _native.cq_entries(np.ascontiguousarray(rows), entries, queue_offsets, queues)
        return cls(entries[:entry_count], queue_offsets[:entry_count], queues[:count].tolist(), min_phys)


class ConsumeQueueStore:
    def __init__(self, root: Path, entries_per_file: int, writable: bool, open_files: OpenFiles | None = None) -> None:
        self.root = root
        self.entries_per_file = entries_per_file
        self.writable = writable
        self.open_files = open_files  # shared by every queue's files
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._mark_map: mmap.mmap | None = None  # the mark file, mapped once a batch has marked it
        self._predecessor_cleared = False  # a mark left by an earlier process removed (or none found)
        self._mark_path = root / DISPATCHING_NAME
        self._dir_sync = DirectorySync(root.parent)  # queue directories and files made, for ``flush``

    @classmethod
    def open(cls, root: Path | str, entries_per_file: int = DEFAULT_CQ_ENTRIES_PER_FILE, *,
             writable: bool = True, open_files: OpenFiles | None = None) -> ConsumeQueueStore:
        """Open every queue directory; directory names that are not queue ids are skipped."""
        store = cls(Path(root), entries_per_file, writable, open_files)
        if writable:
            store.root.mkdir(parents=True, exist_ok=True)
        try:
            if store.root.is_dir():
                for topic_dir in sorted(p for p in store.root.iterdir() if p.is_dir()):
                    if topic_dir.name.startswith(DELETED_PREFIX):
                        if writable:
                            _remove_deleted(topic_dir)
                        continue
                    for queue_dir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
                        if queue_dir.name.isdigit():
                            store.get(topic_dir.name, int(queue_dir.name), create=True)
        except BaseException:
            store.close()  # the queues opened before the one that failed
            raise
        return store

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
        self.queues.clear()
        if self._mark_map is not None:
            cleared = _MARK.unpack(self._mark_map[:_MARK.size])[0] == NO_BATCH
            self._mark_map.close()
            self._mark_map = None
            if cleared:
                self._mark_path.unlink(missing_ok=True)

    def dispatching_from(self) -> int:
        """Where the batch that was being written starts, or ``NO_BATCH`` (see the module docstring)."""
        try:
            data = (self.root / DISPATCHING_NAME).read_bytes()
        except FileNotFoundError:
            return NO_BATCH
        return _MARK.unpack(data)[0] if len(data) == _MARK.size else NO_BATCH

    def applied_end(self) -> int:
        """Where dispatch resumes: the furthest byte the queues cover (or a topic deletion found
        applied), or the start of a batch that was being written across several queues when its
        writer stopped (-1: no entries)."""
        end, batch = max(self.max_phys_end(), self.applied_floor()), self.dispatching_from()
        return end if batch == NO_BATCH else min(end, batch)

    def applied_floor(self) -> int:
        """How far the queues were applied when a topic was last deleted (-1: never)."""
        try:
            data = (self.root / FLOOR_NAME).read_bytes()
        except FileNotFoundError:
            return -1
        return _MARK.unpack(data)[0] if len(data) == _MARK.size else -1

    def _set_floor(self, phys_offset: int) -> None:
        write_atomic(self.root / FLOOR_NAME, _MARK.pack(phys_offset), keep_backup=False)

    def _mark(self, phys_offset: int) -> None:
        if self._mark_map is None:
            fd = os.open(self._mark_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, _MARK.size)
                self._mark_map = mmap.mmap(fd, _MARK.size)
            finally:
                os.close(fd)
        self._mark_map[:_MARK.size] = _MARK.pack(phys_offset)

    def _clear_mark(self) -> None:
        if self._mark_map is not None:
            self._mark_map[:_MARK.size] = _CLEARED
        elif not self._predecessor_cleared:  # honoured by applied_end before this batch
            self._mark_path.unlink(missing_ok=True)
            self._predecessor_cleared = True

    def get(self, topic: str, queue_id: int, *, create: bool = False) -> ConsumeQueue | None:
        cq = self.queues.get((topic, queue_id))
        if cq is None and (create or (self.root / topic / str(queue_id)).is_dir()):
            cq = ConsumeQueue.open(self.root, topic, queue_id, self.entries_per_file, writable=self.writable,
                                   open_files=self.open_files)
            if self.writable:
                cq.queue.dir_sync = self._dir_sync
            self.queues[(topic, queue_id)] = cq
        return cq

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self.queues.values()))

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self.queues):
            out.setdefault(topic, []).append(queue_id)
        return out

    def dispatch(self, request: DispatchRequest) -> None:
        if request.has_queue_entry:
            cq = self.get(request.topic, request.queue_id, create=True)
            assert cq is not None
            cq.append(request.queue_offset, request.phys_offset, request.size, request.tags_code)

    def dispatch_rows(self, rows: np.ndarray[Any, Any], topics: list[str], *,
                      expired_below: int = -1) -> dict[tuple[str, int], int]:
        """``dispatch`` for ``DISPATCH_COLUMNS`` rows (``topics`` is what their ``topic`` column
        indexes); rows that get no queue entry (``DispatchRequest.has_queue_entry``) are skipped.
        Returns, per (topic, queue id) given entries, the queue offset after its last."""
        batch = QueueEntries.of(rows)
        if not batch.queues:
            return {}
        if len(batch.queues) > 1:
            self._mark(batch.min_phys_offset)
        ends: dict[tuple[str, int], int] = {}
        for topic, queue_id, first, end, first_queue_offset, end_queue_offset, first_phys, phys_end in batch.queues:
            key = (topics[topic], queue_id)
            cq = self.get(*key, create=True)
            assert cq is not None
            cq.append_entries(batch.queue_offsets[first:end], batch.entries[first:end], expired_below=expired_below,
                              span=(first_queue_offset, end_queue_offset, first_phys, phys_end))
            ends[key] = end_queue_offset
        self._clear_mark()  # every queue holds the batch now
        return ends

    def published_state(self) -> tuple[dict[tuple[str, int], int], int]:
        """Read off the files, trusting no cursor (another process writes them): each queue's next
        offset, and the furthest commitlog byte their entries cover (the commitlog min if none)."""
        offsets: dict[tuple[str, int], int] = {}
        phys_end = -1
        for cq in self:
            end = cq.scan_valid_end()
            offsets[(cq.topic, cq.queue_id)] = end
            last = cq.entry(end - 1) if end > cq.min_queue_offset else None
            if last is not None:
                phys_end = max(phys_end, last[0] + last[1])
        return offsets, max(phys_end, self.applied_floor())

    def refresh(self) -> None:
        """Open queue directories another process created since."""
        if not self.root.is_dir():
            return
        for topic_dir in self.root.iterdir():
            if topic_dir.is_dir() and not topic_dir.name.startswith(DELETED_PREFIX):
                for queue_dir in topic_dir.iterdir():
                    if queue_dir.name.isdigit() and (topic_dir.name, int(queue_dir.name)) not in self.queues:
                        self.get(topic_dir.name, int(queue_dir.name), create=True)

    def max_phys_end(self) -> int:
        """The furthest commitlog byte any queue covers (-1 when no queue has entries)."""
        return max((cq.max_phys_end for cq in self.queues.values()), default=-1)

    def recover(self) -> None:
        for cq in self.queues.values():
            cq.recover()

    def truncate_dirty(self, phys_offset: int) -> None:
        if self.applied_floor() > phys_offset:  # a torn tail cut below it: re-dispatch from the cut
            self._set_floor(phys_offset)
        for cq in self.queues.values():
            if cq.max_phys_end > phys_offset:
                cq.truncate_dirty(phys_offset)

    def correct_min_offsets(self, min_phys_offset: int) -> None:
        for cq in self.queues.values():
            cq.correct_min_offset(min_phys_offset)

    def delete_expired(self, min_phys_offset: int) -> int:
        return sum(cq.delete_expired(min_phys_offset) for cq in self.queues.values())

    def flush(self, least_pages: int = 0) -> None:
        """Flush every queue; with ``least_pages == 0`` every file of every queue, all the way."""
        for cq in self.queues.values():
            if least_pages == 0:
                cq.queue.flush_all()
            else:
                cq.flush(least_pages)

    def close_topic(self, topic: str) -> None:
        """Close the queues of ``topic`` this store has open, leaving their files."""
        for key in [k for k in self.queues if k[0] == topic]:
            self.queues.pop(key).close()

    def delete_topic(self, topic: str, applied_end: int) -> bool:
        """Close and remove every queue of ``topic`` (its directory too), every record below
        ``applied_end`` being applied; whether there was one."""
        self.close_topic(topic)
        topic_dir = self.root / topic
        if not topic_dir.is_dir():
            return False
        if applied_end > self.applied_floor():
            self._set_floor(applied_end)  # first: a crash before the removal leaves the queues, not a gap
        deleted_dir = self.root / f"{DELETED_PREFIX}{topic}"
        if deleted_dir.exists():
            shutil.rmtree(deleted_dir)  # a topic of this name deleted before, its removal cut short
        topic_dir.rename(deleted_dir)
        fsync_dir(self.root)
        _remove_deleted(deleted_dir)
        return True

    def delete_all(self) -> None:
        for cq in self.queues.values():
            cq.queue.delete_all()
            cq.close()
        self.queues.clear()


def _remove_deleted(deleted_dir: Path) -> None:
    shutil.rmtree(deleted_dir)
    fsync_dir(deleted_dir.parent)


def queue_files(root: Path) -> list[tuple[tuple[str, int], list[int]]]:
    """Every queue under ``consumequeue/`` that has files, with its files' base byte offsets, in
    order; a queue or topic deleted meanwhile is left out (nothing of it needs to be durable)."""
    found = []
    for topic_dir in _listed(root):
        if topic_dir.name.startswith(DELETED_PREFIX):
            continue
        for queue_dir in _listed(topic_dir):
            if queue_dir.name.isdigit():
                bases = sorted(int(p.name) for p in _listed(queue_dir) if is_queue_file_name(p.name))
                if bases:
                    found.append(((topic_dir.name, int(queue_dir.name)), bases))
    return found


def _listed(directory: Path) -> list[Path]:
    """A directory's entries, in order; none for one gone (or a file: the store's marks)."""
    try:
        return sorted(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
