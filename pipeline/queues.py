"""A store's files as the pipeline reads them: read-only numpy maps, nothing written, no cursor trusted.

Consume queues are read as another process's files (the builder may be writing the very entry being
read): a queue ends at its first entry that is not valid (``mqstore.engine.consumequeue.entry``'s rule,
the one ``ConsumeQueue.scan_valid_end`` and the reader use), so a torn in-progress entry is never used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine.consumequeue.entry import CQ_DTYPE, CQ_ENTRY_SIZE, entry_live, valid_prefix
from mqstore.engine.log.mapped_file import MappedFileError
from mqstore.engine.read.store_files import queue_ids

Array = npt.NDArray[Any]
NATIVE_CQ_DTYPE = np.dtype([("phys_offset", "<i8"), ("size", "<i4"), ("tags_code", "<i8")])


class StoreLayoutError(MappedFileError):
    """A commitlog or consume-queue directory whose files are missing, misnamed or of the wrong size."""


def _numbered_files(directory: Path, file_size: int) -> list[tuple[int, Path]]:
    """(file base, path) of a mapped-file directory, adjacency and sizes checked. A last file
    still being allocated (shorter than the others) is left out, as ``MappedFileQueue.open`` does."""
    if not directory.is_dir():
        return []
    found = sorted((int(p.name), p) for p in directory.iterdir() if p.is_file() and p.name.isdigit())
    if found and found[-1][1].stat().st_size != file_size:
        found.pop()
    for index, (base, path) in enumerate(found):
        if path.stat().st_size != file_size:
            raise StoreLayoutError(f"{path}: size {path.stat().st_size} differs from the store's {file_size}")
        if index and base != found[index - 1][0] + file_size:
            raise StoreLayoutError(f"{directory}: files {found[index - 1][1].name} and {path.name} are not adjacent")
    return found


@dataclass(frozen=True, slots=True)
class LogFile:
    """One commitlog file."""

    path: str
    file_base: int
    file_size: int

    @property
    def file_end(self) -> int:
        return self.file_base + self.file_size


def commitlog_files(store_dir: Path, file_size: int) -> list[LogFile]:
    return [LogFile(str(path), base, file_size)
            for base, path in _numbered_files(store_dir / "commitlog", file_size)]


def commitlog_min_offset(store_dir: Path, file_size: int) -> int:
    """The first byte the commitlog still holds (0 for an empty one)."""
    files = commitlog_files(store_dir, file_size)
    return files[0].file_base if files else 0


def read_at(path: str, pos: int, size: int) -> bytes:
    """A few bytes of a file without mapping it (the planner's peeks at record heads)."""
    with open(path, "rb") as f:
        f.seek(pos)
        return f.read(size)


@dataclass(frozen=True, slots=True)
class QueueFiles:
    """One consume queue's files, mapped on demand (``np.memmap``: unmapped when collected)."""

    topic: str
    queue_id: int
    entries_per_file: int
    paths: tuple[str, ...]
    first_queue_offset: int  # of the first file's first entry

    @classmethod
    def open(cls, store_dir: Path, topic: str, queue_id: int, entries_per_file: int) -> QueueFiles:
        files = _numbered_files(store_dir / "consumequeue" / topic / str(queue_id), entries_per_file * CQ_ENTRY_SIZE)
        first = files[0][0] // CQ_ENTRY_SIZE if files else 0
        return cls(topic, queue_id, entries_per_file, tuple(str(p) for _, p in files), first)

    def _file(self, file_no: int) -> Array:
        return np.memmap(self.paths[file_no], dtype=CQ_DTYPE, mode="r")

    def published_end(self) -> int:
        """One past the last complete, valid entry (the queue's max offset as published)."""
        for file_no in range(len(self.paths) - 1, -1, -1):
            entries = self._file(file_no)
            n_valid = valid_prefix(entries)
            if n_valid:
                return self.first_queue_offset + file_no * self.entries_per_file + n_valid
        return self.first_queue_offset

    def read(self, from_offset: int, to_offset: int) -> Array:
        """Entries ``[from_offset, to_offset)`` (copies, native byte order), clipped to the files."""
        lo = max(from_offset, self.first_queue_offset)
        parts: list[Array] = []
        while lo < to_offset:
            file_no, k = divmod(lo - self.first_queue_offset, self.entries_per_file)
            if file_no >= len(self.paths):
                break
            count = min(self.entries_per_file - k, to_offset - lo)
            parts.append(np.array(self._file(file_no)[k:k + count]))
            lo += count
        entries = np.concatenate(parts) if parts else np.empty(0, dtype=CQ_DTYPE)
        return entries.astype(NATIVE_CQ_DTYPE)

    def first_live(self, end: int, min_phys_offset: int) -> int:
        """The first queue offset below ``end`` that is no filler and whose record is still in the
        commitlog (``end`` if none): entries' phys offsets grow with the queue offset."""
        for file_no in range(len(self.paths)):
            base = self.first_queue_offset + file_no * self.entries_per_file
            if base >= end:
                break
            entries = self._file(file_no)[:end - base]
            live = entry_live(entries["phys_offset"], entries["size"], min_phys_offset)
            if bool(live.any()):
                return base + int(np.argmax(live))
        return end


@dataclass(frozen=True, slots=True)
class QueueSpan:
    """A queue's live entries as published: ``[min_offset, end_offset)``."""

    topic: str
    queue_id: int
    min_offset: int
    end_offset: int


def queue_spans(store_dir: Path, entries_per_file: int, min_phys_offset: int,
                topics: frozenset[str] | None = None) -> list[QueueSpan]:
    """Every queue's live span, read off the files (sorted by topic, then queue id)."""
    spans = []
    for topic, queue_id in queue_ids(store_dir):
        if topics is not None and topic not in topics:
            continue
        files = QueueFiles.open(store_dir, topic, queue_id, entries_per_file)
        end = files.published_end()
        spans.append(QueueSpan(topic, queue_id, files.first_live(end, min_phys_offset), end))
    return spans
