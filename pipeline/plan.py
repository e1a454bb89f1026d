"""Planning a batch read on the driver: which commitlog byte ranges and consume-queue slices to read.

Consume-queue entries are record starts, so they cut a big commitlog file into ranges of about
``partitionBytes`` that each begin on a record. They also show which records a filter on topic,
queue or queue offset wants: those reads become ``QueueSlicePartition``s that decode exactly the
records the entries point at.

Not every record has an entry: prepared and rolled-back transaction records never get one, a live
store's newest records may not be dispatched yet, and a store may have lost its consume queues. A
file is *covered* when its entries tile it from its first byte, with no record after the last one;
only covered files are read through consume queues. Every other file (or the undispatched tail of a
covered one) is scanned in full and filtered as it is decoded, so pruning never loses a row.

The consume queues are summarised only where they decide something: a file bigger than
``partitionBytes`` to cut, a file that does not start with a record (whether it holds data is then
theirs to say), a filter that selects queues. Otherwise planning reads one record head a file.

Store time prunes ranges by peeking at the first record of each: store times grow along the
commitlog (RocketMQ's time lookups assume the same), so a range whose first record is after the
wanted interval, or whose successor's first record is before it, holds no wanted record.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pyspark.sql.datasource import InputPartition

from mqstore.engine.config import Geometry
from mqstore.engine.consumequeue.entry import entry_holds_message
from mqstore.engine.log.record import BORN_HOST_POS, MAGIC_V1, MAGIC_V2, SYSFLAG_BORNHOST_V6
from mqstore.pipeline.options import Pushdown
from mqstore.pipeline.queues import LogFile, QueueFiles, QueueSpan, commitlog_files, queue_spans, read_at

Array = npt.NDArray[Any]
_NONE = np.iinfo(np.int64).max
_COVERAGE_CHUNK = 1 << 20  # entries per read while summarising a queue: bounded driver memory


@dataclass(frozen=True, slots=True)
class ScanPartition(InputPartition):
    """Records starting in ``[start_pos, end_pos)`` of one commitlog file, decoded in order until
    the first position that holds no record. ``newest``: the file a broker may be appending to."""

    path: str
    file_base: int
    start_pos: int
    end_pos: int
    newest: bool


@dataclass(frozen=True, slots=True)
class QueueSlicePartition(InputPartition):
    """The records of consume-queue entries ``[from_offset, to_offset)`` of one queue; with
    ``keep``, only those whose commitlog offset lies in one of the ``[lo, hi)`` intervals."""

    topic: str
    queue_id: int
    from_offset: int
    to_offset: int
    keep: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True, slots=True)
class _Range:
    file: LogFile
    start_pos: int
    end_pos: int
    newest: bool

    @property
    def phys_lo(self) -> int:
        return self.file.file_base + self.start_pos

    @property
    def phys_hi(self) -> int:
        return self.file.file_base + self.end_pos


@dataclass(slots=True)
class _Coverage:
    """Per commitlog file, what the consume-queue entries pointing into it add up to, and per grid
    point (every ``partitionBytes`` of a file) the first entry at or after it."""

    files: list[LogFile]
    grid: Array
    count: Array
    covered: Array
    min_phys: Array
    max_end: Array
    cut: Array

    @classmethod
    def empty(cls, files: list[LogFile], partition_bytes: int) -> _Coverage:
        n = len(files)
        grid = np.array([f.file_base + k for f in files for k in range(partition_bytes, f.file_size, partition_bytes)],
                        dtype=np.int64)
        return cls(files, grid, np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, _NONE, np.int64),
                   np.full(n, -1, np.int64), np.full(len(grid), _NONE, np.int64))

    def add(self, phys: Array, size: Array) -> None:
        """Fold in one queue's entries (phys offsets ascending)."""
        files = self.files
        first_base, file_size = files[0].file_base, files[0].file_size
        inside = (phys >= first_base) & (phys < files[-1].file_end)
        phys, size = phys[inside], size[inside]
        if not len(phys):
            return
        index = (phys - first_base) // file_size
        n = len(files)
        self.count += np.bincount(index, minlength=n)
        self.covered += np.bincount(index, weights=size, minlength=n).astype(np.int64)
        present = np.unique(index)
        first = np.searchsorted(index, present, side="left")
        last = np.searchsorted(index, present, side="right") - 1
        self.min_phys[present] = np.minimum(self.min_phys[present], phys[first])
        self.max_end[present] = np.maximum(self.max_end[present], phys[last] + size[last])
        if len(self.grid):
            j = np.searchsorted(phys, self.grid, side="left")
            found = j < len(phys)
            candidate = np.full(len(self.grid), _NONE, np.int64)
            candidate[found] = phys[j[found]]
            same_file = candidate // file_size == self.grid // file_size
            self.cut = np.where(same_file, np.minimum(self.cut, candidate), self.cut)


def plan_partitions(store_dir: Path, geometry: Geometry, pushdown: Pushdown, partition_bytes: int
                    ) -> list[InputPartition]:
    files = commitlog_files(store_dir, geometry.commitlog_file_size)
    if not files or pushdown.empty:
        return []
    coverage = _Coverage.empty(files, partition_bytes)
    spans: list[QueueSpan] = []
    # where every file starts with a record and needs no cut, the consume queues decide nothing
    if pushdown.selects_queues or len(coverage.grid) or not all(_head(f, 0)[0] for f in files):
        spans = queue_spans(store_dir, geometry.cq_entries_per_file, files[0].file_base)
    for span in spans:
        queue = QueueFiles.open(store_dir, span.topic, span.queue_id, geometry.cq_entries_per_file)
        for lo in range(span.min_offset, span.end_offset, _COVERAGE_CHUNK):
            phys, size = _live(queue.read(lo, min(lo + _COVERAGE_CHUNK, span.end_offset)))
            coverage.add(phys, size)
    ranges = _prune(_ranges(coverage), pushdown)
    if not pushdown.selects_queues:
        return [ScanPartition(r.file.path, r.file.file_base, r.start_pos, r.end_pos, r.newest) for r in ranges]
    return _queue_plan(store_dir, geometry, pushdown, partition_bytes, coverage, ranges, spans)


def _live(entries: Array) -> tuple[Array, Array]:
    ok = entry_holds_message(entries["phys_offset"], entries["size"])
    phys, size = entries["phys_offset"][ok].astype(np.int64), entries["size"][ok].astype(np.int64)
    if len(phys) > 1 and not bool((np.diff(phys) > 0).all()):
        order = np.argsort(phys, kind="stable")  # never in a sound queue; stay correct anyway
        phys, size = phys[order], size[order]
    return phys, size


def _head(file: LogFile, pos: int) -> tuple[bool, int]:
    """(whether a record starts at ``pos``, its store time in ms or -1)."""
    if pos + 8 > file.file_size:
        return False, -1
    head = read_at(file.path, pos, 84)
    if len(head) < 8:
        return False, -1
    _, magic = struct.unpack_from(">ii", head, 0)
    if magic not in (MAGIC_V1, MAGIC_V2) or len(head) < 84:
        return magic in (MAGIC_V1, MAGIC_V2), -1
    (sys_flag,) = struct.unpack_from(">i", head, 36)
    (store_ms,) = struct.unpack_from(">q", head, BORN_HOST_POS + (20 if sys_flag & SYSFLAG_BORNHOST_V6 else 8))
    return True, int(store_ms)


def _ranges(coverage: _Coverage) -> list[_Range]:
    """Every file with data, cut at the first record after each grid point."""
    out: list[_Range] = []
    files = coverage.files
    for index, f in enumerate(files):
        if coverage.count[index] == 0 and not _head(f, 0)[0]:
            continue  # no entry and no record at its start: a file with no data yet
        in_file = (coverage.grid >= f.file_base) & (coverage.grid < f.file_end)
        cuts = sorted({int(c) - f.file_base for c in coverage.cut[in_file] if c != _NONE and c > f.file_base})
        bounds = [0, *cuts, f.file_size]
        newest = index == len(files) - 1
        out.extend(_Range(f, a, b, newest) for a, b in itertools.pairwise(bounds))
    return out


def _prune(ranges: list[_Range], pushdown: Pushdown) -> list[_Range]:
    """Drop ranges no wanted record can be in, by phys offset and by store time."""
    store_us = pushdown.bound("store_timestamp")
    if not store_us.unbounded and ranges:
        first_ms = [_head(r.file, r.start_pos)[1] for r in ranges]
        kept = []
        for i, r in enumerate(ranges):
            # the record after this range's last one: the next range's first, when they touch
            adjacent = i + 1 < len(ranges) and ranges[i + 1].phys_lo == r.phys_hi
            next_ms = first_ms[i + 1] if adjacent else -1
            after = first_ms[i] >= 0 and first_ms[i] * 1000 > store_us.hi
            before = next_ms >= 0 and next_ms * 1000 < store_us.lo
            if not (after or before):
                kept.append(r)
        ranges = kept
    phys = pushdown.bound("phys_offset")
    return [r for r in ranges if r.phys_lo <= phys.hi and r.phys_hi - 1 >= phys.lo]


def _queue_plan(store_dir: Path, geometry: Geometry, pushdown: Pushdown, partition_bytes: int,
                coverage: _Coverage, ranges: list[_Range], spans: list[QueueSpan]) -> list[InputPartition]:
    """Scan what consume queues do not cover; read the rest through the wanted queues' entries."""
    files = coverage.files
    parts: list[InputPartition] = []
    keep: list[tuple[int, int]] = []
    for r in ranges:
        index = (r.file.file_base - files[0].file_base) // r.file.file_size
        base = r.file.file_base
        covered = bool(coverage.count[index] > 0 and coverage.min_phys[index] == base
                       and coverage.covered[index] == coverage.max_end[index] - base)
        if not covered:
            parts.append(ScanPartition(r.file.path, base, r.start_pos, r.end_pos, r.newest))
            continue
        keep.append((r.phys_lo, r.phys_hi))
        tail = int(coverage.max_end[index]) - base
        if r.start_pos <= tail < r.end_pos and _head(r.file, tail)[0]:
            # records after the last entry: not dispatched yet, or with no entry at all
            parts.append(ScanPartition(r.file.path, base, tail, r.end_pos, r.newest))
    intervals = _merge(keep)
    whole = len(intervals) == 1 and intervals[0] == (files[0].file_base, files[-1].file_end)
    keep_arg = None if whole else tuple(intervals)
    qo = pushdown.bound("queue_offset")
    for span in spans:
        if not pushdown.wants_queue(span.topic, span.queue_id) or not intervals:
            continue
        lo, hi = max(span.min_offset, qo.lo), min(span.end_offset, qo.hi + 1)
        if lo >= hi:
            continue
        queue = QueueFiles.open(store_dir, span.topic, span.queue_id, geometry.cq_entries_per_file)
        parts.extend(_slices(queue, lo, hi, intervals, keep_arg, partition_bytes))
    return parts


def _slices(queue: QueueFiles, lo: int, hi: int, intervals: list[tuple[int, int]],
            keep: tuple[tuple[int, int], ...] | None, partition_bytes: int) -> list[QueueSlicePartition]:
    """``[lo, hi)`` of one queue trimmed to its first and last wanted entry, cut every
    ``partition_bytes`` of records."""
    out: list[QueueSlicePartition] = []
    starts = np.array([a for a, _ in intervals], dtype=np.int64)
    ends = np.array([b for _, b in intervals], dtype=np.int64)
    for chunk_lo in range(lo, hi, _COVERAGE_CHUNK):
        entries = queue.read(chunk_lo, min(chunk_lo + _COVERAGE_CHUNK, hi))
        phys, size = entries["phys_offset"].astype(np.int64), entries["size"].astype(np.int64)
        slot = np.searchsorted(starts, phys, side="right") - 1
        wanted = (slot >= 0) & (phys < ends[np.maximum(slot, 0)]) & entry_holds_message(phys, size)
        hits = np.flatnonzero(wanted)
        if not len(hits):
            continue
        first, last = int(hits[0]), int(hits[-1]) + 1
        cumulative = np.cumsum(np.where(wanted[first:last], size[first:last], 0))
        cut_at = np.searchsorted(cumulative, np.arange(partition_bytes, int(cumulative[-1]), partition_bytes),
                                 side="right")
        bounds = sorted({0, *(int(c) for c in cut_at), last - first})
        out.extend(QueueSlicePartition(queue.topic, queue.queue_id, chunk_lo + first + a, chunk_lo + first + b, keep)
                   for a, b in itertools.pairwise(bounds) if b > a)
    return out


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged
