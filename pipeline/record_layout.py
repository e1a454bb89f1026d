"""Where the fields of many commitlog records lie in a mapped file, found at once with numpy.

Fixed fields are read through byte-strided views of the file, so an unaligned big-endian int is one
fancy index; the checks are the ones ``engine.record.decode_record`` makes, so a record is valid here
exactly when the engine decodes it (``tests/pipeline/test_columns.py`` holds them to that).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.record import (
    MAGIC_V1,
    MAGIC_V2,
    PROP_CRC_KEY,
    PROP_CRC_SIZE,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
    DecodeKind,
    decode_record,
    parse_prop_crc,
    record_size,
)
from pipeline.byte_columns import NotExact, binary_values, utf8

Array = npt.NDArray[Any]

# header offsets (engine.record's byte table): everything up to the born host is fixed
_SIZE, _MAGIC, _BODY_CRC, _QUEUE_ID, _FLAG, _QUEUE_OFFSET, _PHYS_OFFSET, _SYS_FLAG, _BORN_MS = (
    0, 4, 8, 12, 16, 20, 28, 36, 40)
BORN_HOST_POS = 48
_MIN_V1 = record_size(0, 0, 0, 0, 1)
_MIN_V2 = record_size(0, 0, 0, 0, 2)
_PROP_CRC_TAIL = (PROP_CRC_KEY + "\x01").encode()


class _Views:
    """Big-endian ints readable at any byte position of ``buf``: strided views with a 1-byte stride."""

    def __init__(self, buf: Array) -> None:
        self.u1 = buf
        self.end = len(buf)
        self.i2 = self._view(buf, ">i2")
        self.i4 = self._view(buf, ">i4")
        self.i8 = self._view(buf, ">i8")

    @staticmethod
    def _view(buf: Array, dtype: str) -> Array:
        width = np.dtype(dtype).itemsize
        count = max(len(buf) - width + 1, 0)
        return np.ndarray((count,), dtype=dtype, buffer=buf, offset=0, strides=(1,)) if count else \
            np.zeros(1, dtype=dtype)

    def take(self, view: Array, positions: Array) -> Array:
        """``view[positions]`` with positions clamped into the buffer: a record that claims a field
        past the end reads garbage there, and the layout check rejects it."""
        values: Array = view[np.clip(positions, 0, len(view) - 1)].astype(np.int64)
        return values


@dataclass(frozen=True, slots=True)
class RecordLayout:
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
    def of(cls, buf: Array, starts: Array, limit: int | None = None) -> RecordLayout:
        """Decode the layout of the records starting at ``starts`` (sorted positions in ``buf``);
        no record may pass ``limit`` (default: the buffer's end)."""
        v = _Views(buf)
        limit = v.end if limit is None else limit
        s = starts.astype(np.int64)
        size, magic = v.take(v.i4, s + _SIZE), v.take(v.i4, s + _MAGIC)
        version = np.where(magic == MAGIC_V2, 2, 1)
        sys_flag = v.take(v.i4, s + _SYS_FLAG)
        born_len = np.where(sys_flag & SYSFLAG_BORNHOST_V6, 20, 8)
        store_ms_pos = s + BORN_HOST_POS + born_len
        store_host_pos = store_ms_pos + 8
        store_len = np.where(sys_flag & SYSFLAG_STOREHOST_V6, 20, 8)
        tail = store_host_pos + store_len  # reconsume times, prepared tx offset, body length
        body_pos = tail + 16
        body_len = v.take(v.i4, tail + 12)
        topic_len_pos = body_pos + np.maximum(body_len, 0)
        topic_len = np.where(version == 1, v.take(v.u1, topic_len_pos).astype(np.int8),
                             v.take(v.i2, topic_len_pos))
        topic_pos = topic_len_pos + version
        props_len_pos = topic_pos + np.maximum(topic_len, 0)
        props_len = v.take(v.i2, props_len_pos)
        rec_end = s + size
        expected = (84 - 16 + born_len + store_len + 4 + body_len + version + topic_len + 2 + props_len)
        checks = (
            (np.isin(magic, (MAGIC_V1, MAGIC_V2)), "illegal magic code"),
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
        return cls(s, size, version, v.take(v.i4, s + _BODY_CRC), v.take(v.i4, s + _QUEUE_ID),
                   v.take(v.i4, s + _FLAG), v.take(v.i8, s + _QUEUE_OFFSET), v.take(v.i8, s + _PHYS_OFFSET),
                   sys_flag, v.take(v.i8, s + _BORN_MS), born_len, v.take(v.i8, store_ms_pos), store_host_pos,
                   store_len, v.take(v.i4, tail), v.take(v.i8, tail + 4), body_pos, body_len, topic_pos,
                   topic_len, props_len_pos + 2, props_len, valid_count, reason)

    def __len__(self) -> int:
        return len(self.starts)

    def head(self, count: int) -> RecordLayout:
        """The first ``count`` records (all of them valid when ``count <= valid_count``)."""
        if count >= len(self):
            return self
        fields = {name: getattr(self, name)[:count] for name in self.__slots__
                  if name not in ("valid_count", "reason")}
        return RecordLayout(**fields, valid_count=min(count, self.valid_count),
                            reason=self.reason if count > self.valid_count else "")

    def select(self, index: Array) -> RecordLayout:
        """The records at ``index`` of a layout whose records are all valid."""
        fields = {name: getattr(self, name)[index] for name in self.__slots__
                  if name not in ("valid_count", "reason")}
        return RecordLayout(**fields, valid_count=len(index), reason="")

    def first_bad_topic(self, buf: Array) -> int:
        """Index of the first record whose topic is not UTF-8 (``decode_record`` calls it corrupt),
        or ``len``."""
        topics = binary_values(buf, self.topic_pos, self.topic_len)
        try:
            utf8(topics)
            return len(self)
        except NotExact:
            pass
        for i, raw in enumerate(topics.to_pylist()):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return i
        return len(self)

    def topic_is(self, buf: Array, topic: str) -> Array:
        """Per record: is its topic exactly ``topic``."""
        wanted = np.frombuffer(topic.encode(), dtype=np.uint8)
        same: Array = self.topic_len == len(wanted)
        if not len(wanted) or not bool(same.any()):
            return same
        index = np.flatnonzero(same)
        got = buf[np.clip(self.topic_pos[index, None] + np.arange(len(wanted)), 0, len(buf) - 1)]
        same[index] = (got == wanted).all(axis=1)
        return same

    def first_crc_failure(self, buf: Array, *, require_prop_crc: bool) -> tuple[int, str]:
        """(index, reason) of the first record whose body CRC or whole-record CRC is wrong, or
        (len, ""). One zlib call per record: only asked for where a torn write may sit or the
        caller wants every CRC checked."""
        mv = memoryview(buf)  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
        for i, (start, size, crc, body_pos, body_len, props_pos, props_len) in enumerate(zip(
                self.starts.tolist(), self.size.tolist(), self.body_crc.tolist(), self.body_pos.tolist(),
                self.body_len.tolist(), self.props_pos.tolist(), self.props_len.tolist(), strict=True)):
            if body_len > 0 and zlib.crc32(mv[body_pos:body_pos + body_len]) & 0x7FFFFFFF != crc:
                return i, "body CRC mismatch"
            end = start + size
            has_prop_crc = props_len >= PROP_CRC_SIZE and \
                bytes(mv[end - PROP_CRC_SIZE:end - 11]) == _PROP_CRC_TAIL and mv[end - 1] == 2
            if not has_prop_crc:
                if require_prop_crc:
                    return i, "whole-record CRC property missing"
                if PROP_CRC_KEY.encode() in bytes(mv[props_pos:props_pos + props_len]):
                    # the name somewhere else in the properties: rare, left to the exact decoder
                    decoded = decode_record(mv, start, check_crc=True, read_body=False)
                    if decoded.kind is not DecodeKind.RECORD:
                        return i, decoded.reason
                continue
            stored = parse_prop_crc(bytes(mv[end - 11:end - 1]).decode("ascii", "replace"))
            if stored is None or zlib.crc32(mv[start:end - PROP_CRC_SIZE]) & 0x7FFFFFFF != stored:
                return i, "whole-record CRC mismatch"
        return len(self), ""
