"""A commitlog scan that yields records by the thousand, as ``RecordColumns``, with the verdicts of the
record-by-record ``CommitLog.scan``: the same records, the same blanks rolled over, the same stop.

Record boundaries are a chain (each TOTALSIZE says where the next record starts), walked one int at a
time; where records come in runs of one size, the chain is guessed for a whole run at once and
checked with one numpy gather. A chunk's structure and CRCs are checked with numpy and one zlib call
per body (``RecordColumns``); the position where the walk or a check stops is decoded by
``decode_record`` itself, whose verdict (and reason) is the scan's.
"""

from __future__ import annotations

import struct
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.batch.record_columns import RecordColumns, gather
from engine.log.mapped_file_queue import MappedFileQueue
from engine.log.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2, Decoded, DecodeKind, decode_record, record_size

Array = npt.NDArray[Any]
CHUNK_RECORDS = 4096  # records decoded as one chunk: their columns stay in the CPU's caches
_HEADER = struct.Struct(">ii").unpack_from
_MIN_SIZE = min(record_size(0, 0, 0, 0, 1), record_size(0, 0, 0, 0, 2))
_HEAD = np.dtype([("size", ">i4"), ("magic", ">i4")])
_GUESS_MIN, _GUESS_MAX = 64, 8192  # records in one guessed run of equal sizes


@dataclass(slots=True)
class _Walk:
    """How a walk of one file went: where it is, and how far a guess of equal sizes may reach."""

    pos: int
    guess: int = _GUESS_MIN
    walk_before_guess: int = 8  # records walked one by one before the next guess


def walk(buf: Array, mv: memoryview, state: _Walk, stop_pos: int, max_rows: int) -> tuple[Array, str]:
    """Record starts from ``state.pos`` (advanced past them) and why the walk stopped: "full"
    (``max_rows``), "end" (``stop_pos``), "blank" (a blank record's magic), "bad" (no record there).
    ``mv`` is a memoryview of ``buf`` (struct reads one faster)."""
    limit = len(buf)
    parts: list[Array] = []
    starts: list[int] = []
    count, pos, last_size = 0, state.pos, 0
    why = "full"
    while count < max_rows:
        walked = 0
        while walked < state.walk_before_guess and count < max_rows:
            if pos >= stop_pos:
                why = "end"
                break
            if pos + 8 > limit:
                why = "bad"
                break
            size, magic = _HEADER(mv, pos)
            if magic == BLANK_MAGIC:
                why = "blank"
                break
            if (magic != MAGIC_V1 and magic != MAGIC_V2) or size < _MIN_SIZE or pos + size > limit:
                why = "bad"
                break
            starts.append(pos)
            pos += size
            last_size = size
            walked += 1
            count += 1
        if why != "full" or count >= max_rows:
            break
        run = _guess_run(buf, pos, last_size, min(state.guess, max_rows - count, (stop_pos - pos) // last_size))
        if run:
            parts.append(np.asarray(starts, dtype=np.int64))
            starts = []
            parts.append(pos + last_size * np.arange(run, dtype=np.int64))
            pos += run * last_size
            count += run
        if run == state.guess:
            state.guess, state.walk_before_guess = min(2 * state.guess, _GUESS_MAX), 1
        elif run >= _GUESS_MIN // 4:  # a run ended: walk the odd record, then guess again
            state.guess, state.walk_before_guess = _GUESS_MIN, 2
        else:  # sizes vary here: walk further one by one before guessing again
            state.guess, state.walk_before_guess = _GUESS_MIN, min(2 * state.walk_before_guess, 1024)
    parts.append(np.asarray(starts, dtype=np.int64))
    state.pos = pos
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)), why


def _guess_run(buf: Array, pos: int, size: int, count: int) -> int:
    """How many records of exactly ``size`` bytes follow each other from ``pos`` (up to ``count``,
    each whole inside the buffer): the chain the walk would follow, checked in one gather."""
    count = min(count, (len(buf) - pos) // size) if size > 0 else 0
    if count <= 0:
        return 0
    head = gather(buf, pos + size * np.arange(count, dtype=np.int64), _HEAD)
    ok = (head["size"] == size) & ((head["magic"] == MAGIC_V1) | (head["magic"] == MAGIC_V2))
    return count if bool(ok.all()) else int(np.argmin(ok))


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
        state = _Walk(pos)
        found = self.starts.setdefault(file_base, [])
        while True:
            starts, why = self._next_starts(buf, mv, state, stop_pos, known)
            bad_at = state.pos if why in ("bad", "blank") else -1
            if len(starts):
                records = self._checked(buf, starts)
                if records.valid_count:
                    chunk = records.head(records.valid_count)
                    found.append(chunk.starts)
                    self.end = file_base + int(chunk.starts[-1] + chunk.size[-1])
                    yield ColumnChunk(file_base, buf, chunk)
                if records.valid_count < len(starts):
                    bad_at = int(starts[records.valid_count])
                    state.pos = bad_at
            if bad_at < 0:
                if why == "full":
                    continue
                return file_base + state.pos  # "end": the range ends here, or the file does
            decoded = decode_record(mv, bad_at, check_crc=self.check_crc, read_body=False,
                                    require_prop_crc=self.require_prop_crc)
            if decoded.kind is DecodeKind.RECORD:  # the fast checks were stricter than the decoder: take it
                one = RecordColumns.of(buf, np.array([bad_at], dtype=np.int64))
                found.append(one.starts)
                self.end = file_base + bad_at + decoded.size
                yield ColumnChunk(file_base, buf, one)
                state.pos = bad_at + decoded.size
                continue
            if decoded.kind is DecodeKind.BLANK:
                self.end = self.queue.roll_next(file_base + bad_at)
                return self.end
            self.stop = (file_base + bad_at, decoded)
            return None

    def _next_starts(self, buf: Array, mv: memoryview, state: _Walk, stop_pos: int,
                     known: Array | None) -> tuple[Array, str]:
        """Starts found by an earlier scan where it walked from here, else the walk's."""
        if known is not None:
            first = int(np.searchsorted(known, state.pos))
            if first < len(known) and int(known[first]) == state.pos:
                starts = known[first:first + CHUNK_RECORDS]
                starts = starts[starts < stop_pos]
                if len(starts):
                    (size,) = struct.unpack_from(">i", mv, int(starts[-1]))
                    state.pos = int(starts[-1]) + size
                    return starts, "full"
        return walk(buf, mv, state, stop_pos, CHUNK_RECORDS)

    def _checked(self, buf: Array, starts: Array) -> RecordColumns:
        """The columns of ``starts``, ``valid_count`` cut at the first record the decoder refuses."""
        records = RecordColumns.of(buf, starts)
        n_ok = records.valid_count
        n_ok = min(n_ok, records.head(n_ok).first_bad_topic(buf))
        if self.check_crc and n_ok:
            n_ok = min(n_ok, records.head(n_ok).first_crc_failure(buf, require_prop_crc=self.require_prop_crc)[0])
        return records if n_ok == records.valid_count else _with_valid_count(records, n_ok)


def _with_valid_count(records: RecordColumns, count: int) -> RecordColumns:
    fields = {name: getattr(records, name) for name in records.__slots__ if name not in ("valid_count", "reason")}
    return RecordColumns(**fields, valid_count=count, reason="")


def known_starts(scan: ColumnScan) -> dict[int, Array]:
    """Every record start ``scan`` found, one sorted array per file base."""
    return {base: np.concatenate(parts) for base, parts in scan.starts.items() if parts}
