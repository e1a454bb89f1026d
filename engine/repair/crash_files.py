"""What a power cut leaves in a store's file names and sizes, made openable before the store opens.

A power cut keeps what was synced and any subset of the rest: a file's name may survive without its
size (a creation whose allocation was never synced reads 0 bytes, or short), a later name may
survive while an earlier one is lost (two creations, neither synced by a directory fsync), and a
rename may resolve either way. The opens refuse such files, rightly after a clean stop; after an
abnormal one ``repair_crash_files`` runs first and returns what it did:

- commitlog (the truth): a file shorter than the store's file size is extended to it with zeros, so
  its records stay up to where they are whole and the recovery scan cuts the rest as a torn tail.
  A file missing between two others is real damage (``CrashFilesError``) unless every file after
  the gap lies past the last durable flush: the flush service syncs the directory before it counts
  any byte of a new file flushed, so a lost name means no flush reached that file, and nothing
  after it was ever durable. Those files are the allowed lost tail and are deleted. A leftover
  ``.spare.preparing`` or ``.spare`` is removed: the writer may have adopted the spare (a rename the
  cut undid) and written records into it, which must never come back as a fresh next file.
- consume queues (derived): each queue is cut back to its last whole file before the first short
  file or gap; ``cut_queues`` names them, and recovery re-dispatches each from its new end.
- index files (derived): a file of the wrong size or an impossible header is set aside with every
  newer one; recovery re-indexes from the newest file left.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mqstore.engine.config import Geometry
from mqstore.engine.consumequeue.consume_queue import cq_file_size
from mqstore.engine.errors import MqstoreError
from mqstore.engine.keyindex.file_names import index_file_names
from mqstore.engine.keyindex.index_file import INDEX_HEADER_DTYPE, INDEX_HEADER_SIZE
from mqstore.engine.log.mapped_file_queue import SPARE_NAME, SPARE_PREPARING_NAME, is_queue_file_name
from mqstore.engine.log.record import DecodeKind, decode_record
from mqstore.engine.meta.metafile import fsync_dir

_HEADER = struct.Struct(">qqqqii")
assert _HEADER.size == INDEX_HEADER_SIZE == INDEX_HEADER_DTYPE.itemsize


class CrashFilesError(MqstoreError):
    """A store's files are damaged in a way a power cut cannot explain (a commitlog file missing
    below what the checkpoint counts flushed)."""


@dataclass(frozen=True, slots=True)
class CrashRepair:
    notes: list[str] = field(default_factory=list)                   # what was done, one line each
    cut_queues: set[tuple[str, int]] = field(default_factory=set)    # consume queues cut back


def repair_crash_files(store_dir: Path, geometry: Geometry, physic_msg_ms: int) -> CrashRepair:
    """Make the files a power cut left openable (see the module docstring). ``physic_msg_ms``: the
    checkpoint's store time of the last flushed commitlog record."""
    repair = CrashRepair()
    _repair_commitlog(store_dir / "commitlog", geometry.commitlog_file_size, physic_msg_ms, repair)
    _repair_queues(store_dir / "consumequeue", cq_file_size(geometry.cq_entries_per_file), repair)
    _repair_index(store_dir / "index", geometry.index_slot_count, geometry.index_entry_count,
                  geometry.index_file_size, repair)
    return repair


def _numbered(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted((p for p in directory.iterdir() if is_queue_file_name(p.name) and p.is_file()),
                  key=lambda p: int(p.name))


def _extend(path: Path, file_size: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, file_size)  # the missing range reads as zeros
        os.fsync(fd)
    finally:
        os.close(fd)


def _first_gap(paths: list[Path], file_size: int) -> int | None:
    """The index of the first file not adjacent to the one before it."""
    for i, (prev, cur) in enumerate(itertools.pairwise(paths), 1):
        if int(cur.name) - int(prev.name) != file_size:
            return i
    return None


def _repair_commitlog(directory: Path, file_size: int, physic_msg_ms: int, repair: CrashRepair) -> None:
    if not directory.is_dir():
        return
    changed = False
    for name in (SPARE_PREPARING_NAME, SPARE_NAME):
        if (directory / name).exists():
            (directory / name).unlink()
            repair.notes.append(f"{directory / name}: a spare left by the cut, removed")
            changed = True
    paths = _numbered(directory)
    gap = _first_gap(paths, file_size)
    if gap is not None:
        after = paths[gap:]
        flushed = [p.name for p in after if _first_record_ms(p, file_size) < physic_msg_ms]
        if flushed:
            raise CrashFilesError(
                f"{directory}: files {paths[gap - 1].name} and {paths[gap].name} are not adjacent, and "
                f"{', '.join(flushed)} hold records older than the last flushed one (the checkpoint's "
                f"{physic_msg_ms}): a commitlog file is missing")
        for path in after:
            path.unlink()
        repair.notes.append(f"{directory}: files after a gap at {paths[gap - 1].name} were never flushed "
                            f"(the lost tail of a power cut), removed: {', '.join(p.name for p in after)}")
        paths, changed = paths[:gap], True
    for path in paths:
        size = path.stat().st_size
        if size != file_size:
            if size > file_size:
                raise CrashFilesError(f"{path}: {size} bytes, more than the store's file size {file_size}")
            _extend(path, file_size)
            repair.notes.append(f"{path}: {size} bytes after the cut, extended to {file_size} with zeros")
            changed = True
    if changed:
        fsync_dir(directory)


def _first_record_ms(path: Path, file_size: int) -> int:
    """Store time of the file's first whole record; a large value when it holds none (nothing in it
    can have been flushed, or it would be whole)."""
    with open(path, "rb") as f:
        head = f.read(min(file_size, 1 << 20))
    decoded = decode_record(head, 0, read_body=False)
    if decoded.kind is not DecodeKind.RECORD or decoded.record is None:
        return 1 << 62
    return decoded.record.store_ms


def _repair_queues(root: Path, file_size: int, repair: CrashRepair) -> None:
    if not root.is_dir():
        return
    for topic_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for queue_dir in sorted(p for p in topic_dir.iterdir() if p.is_dir() and p.name.isdigit()):
            paths = _numbered(queue_dir)
            gap = _first_gap(paths, file_size)
            keep = len(paths) if gap is None else gap
            short = next((i for i, p in enumerate(paths[:keep]) if p.stat().st_size != file_size), None)
            if short is not None:
                keep = short
            if keep == len(paths) or (keep == len(paths) - 1 and paths[-1].stat().st_size == 0):
                continue  # whole (a zero-length last file is what any open removes)
            for path in paths[keep:]:
                path.unlink()
            fsync_dir(queue_dir)
            repair.cut_queues.add((topic_dir.name, int(queue_dir.name)))
            repair.notes.append(f"{queue_dir}: a short file or a gap after the cut; cut back to "
                                f"{paths[keep - 1].name if keep else 'nothing'}, re-dispatched from the commitlog")


def _repair_index(index_dir: Path, slot_count: int, entry_count: int, file_size: int, repair: CrashRepair) -> None:
    names = index_file_names(index_dir)
    prev_end_phys = 0
    for i, name in enumerate(names):
        problem = _index_problem(index_dir / name, slot_count, entry_count, file_size, prev_end_phys)
        if problem:
            for doomed in names[i:]:
                (index_dir / doomed).unlink()
            fsync_dir(index_dir)
            repair.notes.append(f"{index_dir / name}: {problem}; set aside with every newer index file "
                                f"({len(names) - i}), re-indexed from the commitlog")
            return
        prev_end_phys = _index_header(index_dir / name)[3]


def _index_header(path: Path) -> tuple[int, int, int, int, int, int]:
    with open(path, "rb") as f:
        return _HEADER.unpack(f.read(_HEADER.size))


def _index_problem(path: Path, slot_count: int, entry_count: int, file_size: int, prev_end_phys: int) -> str:
    size = path.stat().st_size
    if size != file_size:
        return f"{size} bytes, the geometry's files have {file_size}"
    begin_ms, end_ms, begin_phys, end_phys, slot_used, index_count = _index_header(path)
    checks: list[tuple[bool, Callable[[], str]]] = [
        (min(begin_ms, end_ms, begin_phys, end_phys) < 0, lambda: "a negative time or offset"),
        (begin_ms > end_ms or begin_phys > end_phys, lambda: f"begins after it ends ({begin_phys} > {end_phys} "
                                                             f"or {begin_ms} > {end_ms})"),
        (not 0 <= slot_used <= slot_count, lambda: f"{slot_used} slots used of {slot_count}"),
        (index_count > entry_count, lambda: f"{index_count} entries of {entry_count}"),
        (end_phys < prev_end_phys, lambda: f"ends at {end_phys}, before the previous file's end {prev_end_phys}"),
    ]
    return next((why() for bad, why in checks if bad), "")
