"""The numpy/Python decoding of commitlog records as columns that the scan kernels replaced
(``mqstore.engine._native.record_columns`` and ``scan_records``, behind ``mqstore.engine.batch.record_columns`` and
``mqstore.engine.batch.column_scan``): the oracle their property tests hold them to. ``record_columns_of`` was
``RecordColumns.of``; ``first_bad_topic`` and ``first_crc_failure`` its methods; ``walk`` the scan's
walk of the chain of records."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine.batch.record_columns import RecordColumns, gather, gather_bytes
from mqstore.engine.log.record import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    PROP_CRC_KEY,
    PROP_CRC_SIZE,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    DecodeKind,
    decode_record,
    record_size,
)
from tests.oracle.crc import crc31_spans

Array = npt.NDArray[Any]

BORN_HOST_POS = 48
_MIN_V1 = record_size(0, 0, 0, 0, 1)
_MIN_V2 = record_size(0, 0, 0, 0, 2)
_PROP_CRC_NAME = PROP_CRC_KEY.encode()
_PROP_CRC_HEAD = np.frombuffer(_PROP_CRC_NAME + b"\x01", dtype=np.uint8)  # the tail's first 9 bytes
_DIGIT_WEIGHTS = 10 ** np.arange(10, dtype=np.int64)  # digits are written least significant first
_HOSTS_V6 = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6
_HEADER = struct.Struct(">ii").unpack_from
_MIN_SIZE = min(_MIN_V1, _MIN_V2)
_HEAD = np.dtype([("size", ">i4"), ("magic", ">i4")])
_GUESS_MIN, _GUESS_MAX = 64, 8192  # records in one guessed run of equal sizes

# header fields up to the born host sit at fixed positions whatever the hosts' families
_FIXED = np.dtype({"names": ["size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "phys_offset",
                             "sys_flag", "born_ms"],
                   "formats": [">i4", ">i4", ">i4", ">i4", ">i4", ">i8", ">i8", ">i4", ">i8"],
                   "offsets": [0, 4, 8, 12, 16, 20, 28, 36, 40], "itemsize": 48})
# with both hosts IPv4 (the usual record) the rest of the header, from the born host on
_REST_V4 = np.dtype({"names": ["store_ms", "reconsume_times", "prepared_tx_offset", "body_len"],
                     "formats": [">i8", ">i4", ">i8", ">i4"], "offsets": [8, 24, 28, 36], "itemsize": 40})
# otherwise the store timestamp and the fields after the store host, gathered apart
_TAIL = np.dtype({"names": ["reconsume_times", "prepared_tx_offset", "body_len"],
                  "formats": [">i4", ">i8", ">i4"], "offsets": [0, 4, 12], "itemsize": 16})


def _int64(values: Array) -> Array:
    return values.astype(np.int64)


def record_columns_of(buf: Array, starts: Array, limit: int | None = None) -> RecordColumns:
    """Decode the layout of the records starting at ``starts`` (sorted positions in ``buf``);
    no record may pass ``limit`` (default: the buffer's end)."""
    limit = len(buf) if limit is None else limit
    s = np.asarray(starts, dtype=np.int64)
    fixed = gather(buf, s, _FIXED)
    size, magic, sys_flag = _int64(fixed["size"]), _int64(fixed["magic"]), _int64(fixed["sys_flag"])
    version = np.where(magic == MAGIC_V2, 2, 1)
    born_len = np.where(sys_flag & SYSFLAG_BORNHOST_V6, 20, 8)
    store_len = np.where(sys_flag & SYSFLAG_STOREHOST_V6, 20, 8)
    store_ms_pos = s + BORN_HOST_POS + born_len
    store_host_pos = store_ms_pos + 8
    tail_pos = store_host_pos + store_len  # reconsume times, prepared tx offset, body length
    if not bool((sys_flag & _HOSTS_V6).any()):
        rest = gather(buf, s + BORN_HOST_POS, _REST_V4)
        store_ms, tail = rest["store_ms"], rest
    else:
        store_ms, tail = gather(buf, store_ms_pos, ">i8"), gather(buf, tail_pos, _TAIL)
    body_pos = tail_pos + 16
    body_len = _int64(tail["body_len"])
    topic_len_pos = body_pos + np.maximum(body_len, 0)
    topic_len_bytes = gather_bytes(buf, topic_len_pos, 2)
    topic_len = np.where(version == 1, topic_len_bytes[:, 0].astype(np.int8),
                         topic_len_bytes.view(">i2").reshape(-1)).astype(np.int64)
    topic_pos = topic_len_pos + version
    props_len_pos = topic_pos + np.maximum(topic_len, 0)
    props_len = _int64(gather(buf, props_len_pos, ">i2"))
    rec_end = s + size
    expected = 84 - 16 + born_len + store_len + 4 + body_len + version + topic_len + 2 + props_len
    checks = (
        ((magic == MAGIC_V1) | (magic == MAGIC_V2), "illegal magic code"),
        (size >= np.where(version == 1, _MIN_V1, _MIN_V2), "total size below the minimum"),
        (rec_end <= limit, "record passes the end of the data"),
        ((body_len >= 0) & (body_pos + body_len <= rec_end), "body length outside the record"),
        ((topic_len >= 0) & (topic_pos + topic_len <= rec_end), "topic length outside the record"),
        ((props_len >= 0) & (props_len_pos + 2 + props_len <= rec_end), "properties length outside the record"),
        (expected == size, "total size differs from the fields'"),
    )
    ok = np.ones(len(s), dtype=bool)
    for passed, _ in checks:
        ok &= passed
    valid_count = len(s) if bool(ok.all()) else int(np.argmin(ok))
    reason = "" if valid_count == len(s) else next(r for passed, r in checks if not passed[valid_count])
    return RecordColumns(s, size, version, _int64(fixed["body_crc"]), _int64(fixed["queue_id"]), _int64(fixed["flag"]),
               _int64(fixed["queue_offset"]), _int64(fixed["phys_offset"]), sys_flag, _int64(fixed["born_ms"]),
               born_len, _int64(store_ms), store_host_pos, store_len, _int64(tail["reconsume_times"]),
               _int64(tail["prepared_tx_offset"]), body_pos, body_len, topic_pos, topic_len,
               props_len_pos + 2, props_len, valid_count, reason)


def first_bad_topic(self: RecordColumns, buf: Array) -> int:
    """Index of the first record whose topic is not UTF-8 (``decode_record`` calls it corrupt),
    or ``len``. ASCII topics are told apart with numpy; only the others are decoded."""
    n = len(self)
    if n == 0:
        return 0
    width = min(int(self.topic_len.max()), 256)
    text = gather_bytes(buf, self.topic_pos, width)
    inside = np.arange(width) < self.topic_len[:, None]
    suspects = ((text >= 0x80) & inside).any(axis=1) | (self.topic_len > width)
    mv = memoryview(buf)  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
    for i in np.flatnonzero(suspects).tolist():
        pos, length = int(self.topic_pos[i]), int(self.topic_len[i])
        try:
            bytes(mv[pos:pos + length]).decode("utf-8")
        except UnicodeDecodeError:
            return i
    return n


def first_crc_failure(self: RecordColumns, buf: Array, *, require_prop_crc: bool) -> tuple[int, str]:
    """(index, reason) of the first record whose body CRC or whole-record CRC is wrong, or
    (len, ""): what ``decode_record(check_crc=True)`` checks beyond the layout. One compiled CRC loop
    per body and per sealed record; a record whose properties name ``__CRC32#`` anywhere but
    in a well-formed last property goes to the exact decoder."""
    n = len(self)
    if n == 0:
        return 0, ""
    mv = memoryview(buf)  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
    first, reason = n, ""
    bodies = np.flatnonzero(self.body_len > 0)
    if len(bodies) == len(self):
        bad = np.flatnonzero(crc31_spans(mv, self.body_pos, self.body_pos + self.body_len) != self.body_crc)
        first, reason = (int(bad[0]), "body CRC mismatch") if len(bad) else (first, reason)
    else:
        got = crc31_spans(mv, self.body_pos[bodies], (self.body_pos + self.body_len)[bodies])
        bad = bodies[got != self.body_crc[bodies]]
        first, reason = (int(bad[0]), "body CRC mismatch") if len(bad) else (first, reason)
    ends = self.ends
    tail = gather_bytes(buf, ends - PROP_CRC_SIZE, PROP_CRC_SIZE)
    segment_start = (ends - PROP_CRC_SIZE == self.props_pos) | (buf[np.clip(ends - PROP_CRC_SIZE - 1, 0,
                                                                              len(buf) - 1)] == 2)
    sealed = ((self.props_len >= PROP_CRC_SIZE) & (tail[:, :9] == _PROP_CRC_HEAD).all(axis=1)
              & (tail[:, -1] == 2) & segment_start)
    digits = tail[:, 9:19].astype(np.int64) - ord("0")
    readable = np.asarray(((digits >= 0) & (digits <= 9)).all(axis=1))
    stored = digits @ _DIGIT_WEIGHTS
    checked = np.flatnonzero(sealed[:first])
    if len(checked):
        got = crc31_spans(mv, self.starts[checked], ends[checked] - PROP_CRC_SIZE)
        wrong = checked[~readable[checked] | (got != stored[checked])]
        if len(wrong):
            first, reason = int(wrong[0]), "whole-record CRC mismatch"
    unsealed = np.flatnonzero(~sealed[:first])
    if len(unsealed) and require_prop_crc:
        return int(unsealed[0]), "whole-record CRC property missing"
    for i in _naming_prop_crc(self, mv, unsealed):
        decoded = decode_record(mv, int(self.starts[i]), check_crc=True, read_body=False)
        if decoded.kind is not DecodeKind.RECORD:
            return i, decoded.reason
    return first, reason

def _naming_prop_crc(self: RecordColumns, mv: memoryview, rows: Array) -> list[int]:
    """Which of ``rows`` (ascending) hold ``__CRC32#`` somewhere in their properties: one search
    over the bytes the rows span, then each hit placed in its record."""
    if not len(rows):
        return []
    lo, hi = int(self.props_pos[rows[0]]), int(self.props_pos[rows[-1]] + self.props_len[rows[-1]])
    span = bytes(mv[lo:hi])
    hits: list[int] = []
    at = span.find(_PROP_CRC_NAME)
    while at >= 0:
        hits.append(lo + at)
        at = span.find(_PROP_CRC_NAME, at + 1)
    if not hits:
        return []
    where = np.asarray(hits, dtype=np.int64)
    row = np.searchsorted(self.props_pos[rows], where, side="right") - 1
    ends = (self.props_pos + self.props_len)[rows[np.maximum(row, 0)]]
    inside = (row >= 0) & (where + len(_PROP_CRC_NAME) <= ends)
    found: list[int] = np.unique(rows[row[inside]]).tolist()
    return found


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
