"""Where the fields of many commitlog records lie in a mapped file, decoded at once by a kernel.

``RecordColumns.of`` is one call of ``mqstore.engine._native.record_columns`` (engine/csrc/scan.c) for a whole
batch: every field of every record as int64 columns, and how many records lead before the first
broken one. The checks are the ones ``mqstore.engine.log.record.decode_record`` makes, so a record is valid
here exactly when the engine decodes it (``tests/pipeline/test_columns.py`` and
``tests/engine/batch/test_column_scan.py`` hold them to that); where only the exact decoder can tell,
a record is handed to it. The numpy decoding the kernel replaced is the oracle in
``tests/oracle/batch.py``.

``gather`` and ``gather_bytes`` copy fixed-width items out of a mapped file with one fancy index: the
file is viewed as overlapping items starting at every byte (``V48`` at stride 1), so gathering the
items at many positions is one memcpy each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine import _native
from mqstore.engine.log.record import DecodeKind, decode_record

Array = npt.NDArray[Any]

BORN_HOST_POS = 48
FIELD_COUNT = 22  # RecordColumns' arrays, in the order of its fields and of the kernels' rows
CHECK_TOPIC, CHECK_CRC, REQUIRE_PROP_CRC = 1, 2, 4  # the kernels' checks beyond the layout
# the kernels' verdicts by code: the layout's (the checks in decode_record's order), the topic's, the CRCs'
REASONS = ("", "illegal magic code", "total size below the minimum", "record passes the end of the data",
           "body length outside the record", "topic length outside the record",
           "properties length outside the record", "total size differs from the fields'", "topic is not UTF-8",
           "body CRC mismatch", "whole-record CRC mismatch", "whole-record CRC property missing",
           "properties name __CRC32# elsewhere: decode_record decides")
DECODER = len(REASONS) - 1


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
        return cls.checked(buf, starts, 0, limit)[0]

    @classmethod
    def checked(cls, buf: Array, starts: Array, checks: int, limit: int | None = None) -> tuple[RecordColumns, int]:
        """``of``, with ``valid_count`` cut also at the first record that fails ``checks`` (``CHECK_TOPIC``,
        ``CHECK_CRC``, ``REQUIRE_PROP_CRC``), in one kernel call (``mqstore.engine._native.record_columns``); and
        the verdict's code (``DECODER``: only ``decode_record`` can tell)."""
        s = np.ascontiguousarray(starts, dtype=np.int64)
        out = np.empty((FIELD_COUNT, len(s)), np.int64)
        valid_count, code = _native.record_columns(buf, s, len(buf) if limit is None else limit, checks, out)
        return cls.of_matrix(out, valid_count, code), code

    @classmethod
    def of_matrix(cls, out: Array, valid_count: int, code: int) -> RecordColumns:
        """The columns a kernel wrote into ``out`` (a row a field, in field order)."""
        return cls(**dict(zip(COLUMN_NAMES, out, strict=True)), valid_count=valid_count, reason=REASONS[code])

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
        or ``len``."""
        return self.checked(buf, self.starts, CHECK_TOPIC)[0].valid_count

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
        (len, ""): what ``decode_record(check_crc=True)`` checks beyond the layout, in one kernel call;
        a record whose properties name ``__CRC32#`` anywhere but in a well-formed last property goes
        to the exact decoder."""
        checks = CHECK_CRC | (REQUIRE_PROP_CRC if require_prop_crc else 0)
        done = 0
        while done < len(self):
            records, code = self.checked(buf, self.starts[done:], checks)
            at = done + records.valid_count
            if code != DECODER:
                return at, records.reason
            with memoryview(buf) as mv:  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
                decoded = decode_record(mv, int(self.starts[at]), check_crc=True, read_body=False)
            if decoded.kind is not DecodeKind.RECORD:
                return at, decoded.reason
            done = at + 1
        return len(self), ""


COLUMN_NAMES = tuple(f.name for f in dataclasses.fields(RecordColumns))[:FIELD_COUNT]
