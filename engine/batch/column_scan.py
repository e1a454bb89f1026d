"""A commitlog scan that yields records by the thousand, as ``RecordColumns``, with the verdicts of the
record-by-record ``CommitLog.scan``: the same records, the same blanks rolled over, the same stop.

Record boundaries are a chain (each TOTALSIZE says where the next record starts): one kernel call
(``mqstore.engine._native.scan_records``) walks a chunk of it and decodes and checks every record on the way
(layout, topic, CRCs: ``RecordColumns``); the position where the walk or a check stops is decoded by
``decode_record`` itself, whose verdict (and reason) is the scan's. The numpy walk the kernel replaced
is the oracle in ``tests/oracle/batch.py``.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine import _native
from mqstore.engine.batch.record_columns import CHECK_CRC, CHECK_TOPIC, FIELD_COUNT, REQUIRE_PROP_CRC, RecordColumns
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file_queue import MappedFileQueue
from mqstore.engine.log.record import Decoded, DecodeKind, decode_record

Array = npt.NDArray[Any]
CHUNK_RECORDS = 4096  # records decoded as one chunk: their columns stay in the CPU's caches
WHY = ("full", "end", "blank", "bad")  # why a walk stopped, by the kernel's code


def walk(buf: Array, pos: int, stop_pos: int, max_rows: int, checks: int) -> tuple[RecordColumns, int, str, int]:
    """The records from ``pos`` on, decoded and checked (``RecordColumns.checked``'s ``checks``) in one
    kernel call (``mqstore.engine._native.scan_records``): (their columns, where the walk stopped, why: "full"
    (``max_rows``), "end" (``stop_pos``), "blank" (a blank record's magic), "bad" (no record there, or
    one that fails the checks), the verdict's code)."""
    out = np.empty((FIELD_COUNT, max_rows), np.int64)
    count, pos, why, code = _native.scan_records(buf, pos, stop_pos, max_rows, checks, out)
    return RecordColumns.of_matrix(out[:, :count], count, 0), pos, WHY[why], code


@dataclass(frozen=True, slots=True)
class ColumnChunk:
    """Consecutive valid records of one commitlog file (its bytes mapped as ``buf``)."""

    file_base: int
    buf: Array
    records: RecordColumns


@dataclass(slots=True)
class ColumnScan:
    """Iterate to get the chunks of ``[from_phys, to_phys)``; afterwards ``end`` is where the last
    record (or the file a blank closed) ends, ``stop`` the position and verdict of the record that
    ended the scan (None when it reached ``to_phys`` or the last file), and ``starts`` every record
    start found, per file base, which a later scan of the same range takes as ``known`` instead of
    walking the chain again."""

    queue: MappedFileQueue
    from_phys: int
    to_phys: int
    check_crc: bool
    require_prop_crc: bool
    known: dict[int, Array] | None = None
    end: int = 0
    stop: tuple[int, Decoded] | None = None
    starts: dict[int, list[Array]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.end = self.from_phys

    def drain(self) -> ColumnScan:
        """Run the scan through, keeping nothing but where it ended and the record starts."""
        for _ in self:
            pass
        return self

    def __iter__(self) -> Generator[ColumnChunk, None, None]:
        phys = self.from_phys
        while phys < self.to_phys:
            mf = self.queue.find(phys)
            if mf is None:
                return
            buf = np.frombuffer(mf.buffer, dtype=np.uint8)
            try:
                next_phys = yield from self._scan_file(mf.file_base, buf, phys - mf.file_base)
            finally:
                del buf  # no view may outlive the scan: the map is cut or closed after it
            if next_phys is None:
                return
            phys = next_phys

    def _scan_file(self, file_base: int, buf: Array, pos: int) -> Generator[ColumnChunk, None, int | None]:
        """The chunks of one file from ``pos``; returns where the scan goes on (None: it stopped)."""
        with memoryview(buf) as mv:  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
            return (yield from self._scan_view(file_base, buf, mv, pos))

    def _scan_view(self, file_base: int, buf: Array, mv: memoryview, pos: int
                   ) -> Generator[ColumnChunk, None, int | None]:
        stop_pos = min(len(buf), self.to_phys - file_base)
        known = self.known.get(file_base) if self.known is not None else None
        found = self.starts.setdefault(file_base, [])
        checks = CHECK_TOPIC | (CHECK_CRC | (REQUIRE_PROP_CRC if self.require_prop_crc else 0) if self.check_crc else 0)
        while True:
            records, next_pos, why = self._next_records(buf, pos, stop_pos, known, checks)
            if len(records):
                # a copy: the starts are a row of the chunk's whole column matrix (22 int64s a record),
                # which a view would keep alive for as long as the scan keeps its starts
                found.append(records.starts.copy())
                self.end = file_base + int(records.starts[-1] + records.size[-1])
                yield ColumnChunk(file_base, buf, records)
            pos = next_pos
            if why not in ("bad", "blank"):
                if why == "full":
                    continue
                return file_base + pos  # "end": the range ends here, or the file does
            decoded = decode_record(mv, pos, check_crc=self.check_crc, read_body=False,
                                    require_prop_crc=self.require_prop_crc)
            if decoded.kind is DecodeKind.RECORD:  # the fast checks were stricter than the decoder: take it
                one = RecordColumns.of(buf, np.array([pos], dtype=np.int64))
                found.append(one.starts)
                self.end = file_base + pos + decoded.size
                yield ColumnChunk(file_base, buf, one)
                pos += decoded.size
                continue
            if decoded.kind is DecodeKind.BLANK:
                self.end = self.queue.roll_next(file_base + pos)
                return self.end
            self.stop = (file_base + pos, decoded)
            return None

    def _next_records(self, buf: Array, pos: int, stop_pos: int, known: Array | None,
                      checks: int) -> tuple[RecordColumns, int, str]:
        """The records an earlier scan found where it walked from ``pos``, else the walk's; where the
        next chunk starts, and why this one ended ("bad": at a record the checks refused)."""
        if known is not None:
            first = int(np.searchsorted(known, pos))
            if first < len(known) and int(known[first]) == pos:
                starts = known[first:first + CHUNK_RECORDS]
                starts = starts[starts < stop_pos]
                if len(starts):
                    records, _ = RecordColumns.checked(buf, starts, checks)
                    if records.valid_count < len(starts):
                        return records.head(records.valid_count), int(starts[records.valid_count]), "bad"
                    return records, int(starts[-1] + records.size[-1]), "full"
        records, pos, why, _ = walk(buf, pos, stop_pos, CHUNK_RECORDS, checks)
        return records, pos, why


def known_starts(scan: ColumnScan) -> dict[int, Array]:
    """Every record start ``scan`` found, one sorted array per file base."""
    return {base: np.concatenate(parts) for base, parts in scan.starts.items() if parts}


def scan_columns(commitlog: CommitLog, from_phys: int, to_phys: int | None = None, *, check_crc: bool = True,
                 require_prop_crc: bool = False, known: dict[int, np.ndarray[Any, Any]] | None = None) -> ColumnScan:
    """``CommitLog.scan`` by the chunk of records, as columns: iterate it for the records, then read
    where it ended and why. ``known`` takes the record starts an earlier scan of the range found
    (``known_starts``) instead of walking them again."""
    end = commitlog.max_offset if to_phys is None else to_phys
    return ColumnScan(commitlog.queue, max(from_phys, commitlog.min_offset), end, check_crc, require_prop_crc, known)
