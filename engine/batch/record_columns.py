"""Where the fields of many commitlog records lie in a mapped file, decoded at once with numpy.

A record's fixed fields are copied out with one fancy index per group of fields: the file is viewed as
overlapping fixed-width items starting at every byte (``V48`` at stride 1), so gathering the items at
the records' starts is one memcpy each, and the big-endian fields are views of those copies. The
checks are the ones ``engine.log.record.decode_record`` makes, so a record is valid here exactly when
the engine decodes it (``tests/pipeline/test_columns.py`` and ``tests/engine/batch/test_column_scan.py``
hold them to that); where only the exact decoder can tell, a record is handed to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.log.record import (
    MAGIC_V1,
    MAGIC_V2,
    PROP_CRC_KEY,
    PROP_CRC_SIZE,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    DecodeKind,
    crc31_spans,
    decode_record,
    record_size,
)

Array = npt.NDArray[Any]

BORN_HOST_POS = 48
_MIN_V1 = record_size(0, 0, 0, 0, 1)
_MIN_V2 = record_size(0, 0, 0, 0, 2)
_PROP_CRC_NAME = PROP_CRC_KEY.encode()
_PROP_CRC_HEAD = np.frombuffer(_PROP_CRC_NAME + b"\x01", dtype=np.uint8)  # the tail's first 9 bytes
_DIGIT_WEIGHTS = 10 ** np.arange(10, dtype=np.int64)  # digits are written least significant first
_HOSTS_V6 = SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6

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


def gather(buf: Array, positions: Array, dtype: np.dtype[Any] | str) -> Array:
    """The ``dtype`` item starting at each byte position of ``buf`` (one copy per item); bytes past
    the buffer's end read as zeros. A negative position reads garbage, which the layout checks
    reject (a record claims a field before its own start only when its lengths are broken)."""
    item = np.dtype(dtype)
    width = item.itemsize
    count = len(buf) - width + 1
    raw = f"V{width}"
    if count > 0:
        items = np.ndarray((count,), dtype=raw, buffer=buf, strides=(1,))
        gathered: Array = items[np.clip(positions, 0, count - 1)]
    else:
        gathered = np.zeros(len(positions), dtype=raw)
    late = positions >= count
    if bool(late.any()):  # items that run past the end: copied from a zero-padded copy of the last bytes
        tail_start = max(count, 0)
        padded = np.zeros(2 * width, dtype=np.uint8)
        padded[:len(buf) - tail_start] = buf[tail_start:]
        tail = np.ndarray((width + 1,), dtype=raw, buffer=padded, strides=(1,))
        gathered[late] = tail[np.clip(positions[late] - tail_start, 0, width)]
    return gathered.view(item)


def gather_bytes(buf: Array, positions: Array, width: int) -> Array:
    """``buf[p:p + width]`` for every position, as the rows of an (n, width) uint8 matrix."""
    if width <= 0:
        return np.zeros((len(positions), 0), dtype=np.uint8)
    return gather(buf, positions, f"V{width}").view(np.uint8).reshape(len(positions), width)


def _int64(values: Array) -> Array:
    return values.astype(np.int64)


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """Where each field of ``len(starts)`` records lies in a buffer, and how many lead the batch
    before the first one whose structure is broken (``valid_count``, ``reason`` for that one)."""

    starts: Array
    size: Array
    version: Array
    body_crc: Array
    queue_id: Array
    flag: Array
    queue_offset: Array
    phys_offset: Array
    sys_flag: Array
    born_ms: Array
    born_host_len: Array
    store_ms: Array
    store_host_pos: Array
    store_host_len: Array
    reconsume_times: Array
    prepared_tx_offset: Array
    body_pos: Array
    body_len: Array
    topic_pos: Array
    topic_len: Array
    props_pos: Array
    props_len: Array
    valid_count: int
    reason: str

    @classmethod
    def of(cls, buf: Array, starts: Array, limit: int | None = None) -> RecordColumns:
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
        return cls(s, size, version, _int64(fixed["body_crc"]), _int64(fixed["queue_id"]), _int64(fixed["flag"]),
                   _int64(fixed["queue_offset"]), _int64(fixed["phys_offset"]), sys_flag, _int64(fixed["born_ms"]),
                   born_len, _int64(store_ms), store_host_pos, store_len, _int64(tail["reconsume_times"]),
                   _int64(tail["prepared_tx_offset"]), body_pos, body_len, topic_pos, topic_len,
                   props_len_pos + 2, props_len, valid_count, reason)

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def ends(self) -> Array:
        ends: Array = self.starts + self.size
        return ends

    def head(self, count: int) -> RecordColumns:
        """The first ``count`` records (all of them valid when ``count <= valid_count``)."""
        if count >= len(self):
            return self
        fields = {name: getattr(self, name)[:count] for name in self.__slots__
                  if name not in ("valid_count", "reason")}
        return RecordColumns(**fields, valid_count=min(count, self.valid_count),
                             reason=self.reason if count > self.valid_count else "")

    def select(self, index: Array) -> RecordColumns:
        """The records at ``index`` of a layout whose records are all valid."""
        fields = {name: getattr(self, name)[index] for name in self.__slots__
                  if name not in ("valid_count", "reason")}
        return RecordColumns(**fields, valid_count=len(index), reason="")

    def first_bad_topic(self, buf: Array) -> int:
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

    def topic_is(self, buf: Array, topic: str) -> Array:
        """Per record: is its topic exactly ``topic``."""
        wanted = np.frombuffer(topic.encode(), dtype=np.uint8)
        same: Array = self.topic_len == len(wanted)
        if not len(wanted) or not bool(same.any()):
            return same
        index = np.flatnonzero(same)
        same[index] = (gather_bytes(buf, self.topic_pos[index], len(wanted)) == wanted).all(axis=1)
        return same

    def first_crc_failure(self, buf: Array, *, require_prop_crc: bool) -> tuple[int, str]:
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
        for i in self._naming_prop_crc(mv, unsealed):
            decoded = decode_record(mv, int(self.starts[i]), check_crc=True, read_body=False)
            if decoded.kind is not DecodeKind.RECORD:
                return i, decoded.reason
        return first, reason

    def _naming_prop_crc(self, mv: memoryview, rows: Array) -> list[int]:
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
