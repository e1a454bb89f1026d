"""A commitlog cut into record-aligned ranges for Spark tasks, and the walk of one range.

Records never straddle commitlog files, but where a record starts inside a file is known only by
following the chain of TOTALSIZE fields from the file's first byte. Planning follows that chain
reading 8 header bytes per record (one Spark task per file) and cuts each file at the first record
start at or past every ``split_bytes``; a task then decodes its range in full.

Planner and tasks step through the log with the one rule ``next_record_pos``, which is the path
``mqstore.engine.read.store_files.scan_all`` (and so ``verify_store``) takes: from a record, or from a damaged
record whose length is known (a valid magic code and a TOTALSIZE between the minimum and the rest of
the file), the next one starts TOTALSIZE bytes on; after a blank, an illegal magic code or a length
that cannot be, the walk goes on in the next file; in the last file a damaged record followed only
by zeros is the end of the log. ``decode_record`` gives a damaged record a length in exactly those
cases, so a range walk sees the records, blanks and damaged records the engine's scan sees.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.engine.config import Geometry
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import MappedFile
from mqstore.engine.log.record import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    Decoded,
    DecodeKind,
    Record,
    decode_record,
    record_size,
)
from mqstore.engine.repair.recovery import TORN_TAIL_LOOKAHEAD

DEFAULT_SPLIT_BYTES = 32 * 1024 * 1024
NEXT_FILE = -1

_HEADER = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
_MIN_SIZE = {MAGIC_V1: record_size(0, 0, 0, 0, 1), MAGIC_V2: record_size(0, 0, 0, 0, 2)}


@dataclass(frozen=True, slots=True)
class CommitlogFile:
    path: str
    file_base: int
    file_size: int
    last: bool  # the newest file: where the data ends in zeros


@dataclass(frozen=True, slots=True)
class CommitlogRange:
    """Records starting in [start, stop) of one file; ``start`` is a record start on the chain."""

    file: CommitlogFile
    start: int
    stop: int


def next_record_pos(buf: Any, pos: int, file_size: int) -> int:
    """Where the walk goes after the record (or blank, or damage) at ``pos`` of a file: a position in
    the same file, or NEXT_FILE."""
    if file_size - pos < _HEADER.size:
        return NEXT_FILE
    size, magic = _HEADER.unpack_from(buf, pos)
    min_size = _MIN_SIZE.get(magic)
    if magic == BLANK_MAGIC or min_size is None or not min_size <= size <= file_size - pos:
        return NEXT_FILE
    return int(pos + size)


def commitlog_files(store_dir: Path, geometry: Geometry) -> list[CommitlogFile]:
    """The commitlog's files, oldest first; sizes and adjacency are checked as the engine checks them
    (MappedFileError otherwise)."""
    commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size, writable=False)
    try:
        files = [(str(mf.path), mf.file_base) for mf in commitlog.queue.files]
    finally:
        commitlog.close()
    return [CommitlogFile(path, base, geometry.commitlog_file_size, n == len(files) - 1)
            for n, (path, base) in enumerate(files)]


def plan_ranges(sc: Any, files: list[CommitlogFile], split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[CommitlogRange]:
    """Record-aligned ranges of about ``split_bytes`` covering every file, in commitlog order: one
    Spark task per file finds the cuts."""
    if split_bytes <= 0:
        raise ValueError(f"split_bytes must be positive, got {split_bytes}")
    if not files:
        return []
    cuts = sc.parallelize([(f, split_bytes) for f in files], len(files)).map(_cuts_of).collect()
    ranges: list[CommitlogRange] = []
    for file, starts in zip(files, cuts, strict=True):
        bounds = [*starts, file.file_base + file.file_size]
        ranges.extend(CommitlogRange(file, a, b) for a, b in itertools.pairwise(bounds))
    return ranges


def _cuts_of(task: tuple[CommitlogFile, int]) -> list[int]:
    """Phys offsets of the record starts a file is cut at: its first byte, then the first record
    start at or past each multiple of ``split_bytes``."""
    file, split_bytes = task
    mf = MappedFile.open(Path(file.path), file.file_size, writable=False)
    try:
        buf, cuts, target, pos = mf.buffer, [file.file_base], split_bytes, 0
        while pos != NEXT_FILE:
            if pos >= target:
                cuts.append(file.file_base + pos)
                target = (pos // split_bytes + 1) * split_bytes
            pos = next_record_pos(buf, pos, file.file_size)
    finally:
        mf.close()
    return cuts


def walk_range(r: CommitlogRange, *, require_prop_crc: bool) -> Iterator[tuple[int, Decoded, Record | None]]:
    """(phys offset, decode with CRCs checked, the record) for everything the walk meets in ``r``.
    For a damaged record the record is its decode without CRC checks (None when even that fails):
    what verify_store checks the damaged record's entries against. Blanks come with None."""
    file = r.file
    mf = MappedFile.open(Path(file.path), file.file_size, writable=False)
    try:
        buf, pos, stop = mf.buffer, r.start - file.file_base, r.stop - file.file_base
        while 0 <= pos < stop:
            decoded = decode_record(buf, pos, check_crc=True, read_body=False, require_prop_crc=require_prop_crc)
            record = decoded.record
            if decoded.kind not in (DecodeKind.RECORD, DecodeKind.BLANK):
                if file.last and _zeros_from(buf, pos, file.file_size):
                    return  # the ordinary end of the log
                record = decode_record(buf, pos, check_crc=False, read_body=False).record
            yield file.file_base + pos, decoded, record
            pos = next_record_pos(buf, pos, file.file_size)
    finally:
        mf.close()


def _zeros_from(buf: Any, pos: int, file_size: int) -> bool:
    """Whether only zeros follow ``pos``, one largest record ahead (as scan_all and recovery look)."""
    tail = buf[pos:pos + min(file_size - pos, TORN_TAIL_LOOKAHEAD)]
    return bool(tail.count(0) == len(tail))
