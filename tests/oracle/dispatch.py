"""engine/batch/dispatch_columns.py before the kernel (``mqstore.engine._native.dispatch_keys``): the oracle
of ``DispatchColumns.of``. DispatchRequests of many records at once, as columns decoded from
``RecordColumns``: what re-dispatch hands the consume queues (``DISPATCH_COLUMNS`` rows and their
topic table) and the index (each key's row and hash), without a Python object per record.

Topics are told apart by their Java hash and length, then compared byte for byte with the first of
their kind. Properties are split on ``\\x02`` with numpy and only TAGS, KEYS and UNIQ_KEY are read,
with ``decode_properties``' rules (a segment counts when its name and value are non-empty, a later
one replaces an earlier one). A record this cannot reproduce exactly goes through ``decode_record``
and ``DispatchRequest.from_record`` instead: text that is not ASCII (Java hashes UTF-16 units), a
name given twice, KEYS holding more than one key, a delayed message's tags code, or fields too
long for the matrices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS, DispatchRequest
from mqstore.engine.batch.record_columns import RecordColumns, gather, gather_bytes
from mqstore.engine.keyindex.keys import key_hashes, record_keys
from mqstore.engine.log.record import SCHEDULE_TOPIC, DecodeKind, decode_record
from tests.oracle.jhash import as_signed, java_hashes_of_rows
from tests.oracle.keyindex import joined_hashes

Array = npt.NDArray[Any]
_MAX_TOPIC = 128
_MAX_PROPS = 512
_PAD = 16  # zero bytes after each properties row, so a name read at any segment start stays in its row
_TAGS, _KEYS, _UNIQ = b"TAGS\x01", b"KEYS\x01", b"UNIQ_KEY"
_MASK40 = (1 << 40) - 1


def _little(name: bytes) -> int:
    return int.from_bytes(name, "little")


@dataclass(frozen=True, slots=True)
class DispatchColumnsOracle:
    """``rows`` (``DISPATCH_COLUMNS``, one per record, in commitlog order) with ``topics`` (what their
    ``topic`` column indexes), and the index keys: ``key_rows`` (ascending; a record's UNIQ_KEY
    first, then its KEYS) and ``key_hashes`` (``index_hash`` of ``topic#key``)."""

    rows: Array
    topics: list[str]
    key_rows: Array
    key_hashes: Array

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def of(cls, buf: Array, records: RecordColumns) -> DispatchColumnsOracle:
        """The dispatch columns of ``records`` (all valid) in ``buf``."""
        n = len(records)
        rows = np.zeros(n, dtype=DISPATCH_COLUMNS)
        for name in ("phys_offset", "size", "queue_id", "queue_offset", "store_ms", "sys_flag"):
            rows[name] = getattr(records, name)
        exact = np.zeros(n, dtype=bool)
        topics = _Topics.of(buf, records, exact)
        rows["topic"] = topics.codes
        exact |= topics.codes == topics.code_of(SCHEDULE_TOPIC, add=False)  # a delayed message's tags code
        props = _Properties.of(buf, records, exact)
        tags = props.value(_TAGS, exact)
        keys = props.value(_KEYS, exact, forbid=ord(" "))
        uniq = props.value(_UNIQ, exact)
        tag_hash, key_hash, uniq_hash = (_value_hashes(props, v, exact) for v in (tags, keys, uniq))
        tags_code = np.zeros(n, dtype=np.int64)
        tags_code[tags.present] = as_signed(tag_hash[tags.present])
        fast = ~exact  # every check has marked its records by now
        has_uniq, has_key = uniq.present & fast, keys.present & fast
        counts = has_uniq.astype(np.int64) + has_key
        key_lists: dict[int, Array] = {}
        mv = memoryview(buf)  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
        for i in np.flatnonzero(exact).tolist():
            request = _exact_request(mv, int(records.starts[i]))
            rows["topic"][i] = topics.code_of(request.topic)
            tags_code[i] = request.tags_code
            names = record_keys(request.uniq_key, request.keys)
            key_lists[i] = key_hashes(request.topic, names)
            counts[i] = len(names)
        rows["tags_code"] = tags_code
        bounds = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=bounds[1:])
        key_rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        hashes = np.zeros(int(bounds[-1]), dtype=np.int64)
        hashes[bounds[:-1][has_uniq]] = joined_hashes(topics.hashes[has_uniq], uniq_hash[has_uniq],
                                                      uniq.length[has_uniq])
        hashes[bounds[:-1][has_key] + has_uniq[has_key]] = joined_hashes(topics.hashes[has_key], key_hash[has_key],
                                                                          keys.length[has_key])
        for i, exact_hashes in key_lists.items():
            hashes[bounds[i]:bounds[i + 1]] = exact_hashes
        return cls(rows, topics.names, key_rows, hashes)


def _exact_request(mv: memoryview, start: int) -> DispatchRequest:
    decoded = decode_record(mv, start, check_crc=False, read_body=False)
    if decoded.kind is not DecodeKind.RECORD or decoded.record is None:
        raise ValueError(f"record at {start} no longer decodes: {decoded.reason}")
    return DispatchRequest.from_record(decoded.record)


@dataclass(slots=True)
class _Topics:
    codes: Array       # per record
    hashes: Array      # unsigned Java hash of each record's topic (0 where exact decoding decides)
    names: list[str]
    index: dict[str, int]

    @classmethod
    def of(cls, buf: Array, records: RecordColumns, exact: Array) -> _Topics:
        """Topic codes of the ASCII topics; records with others are marked ``exact``."""
        n = len(records)
        lengths = records.topic_len
        width = min(int(lengths.max()) if n else 0, _MAX_TOPIC)
        text = gather_bytes(buf, records.topic_pos, width)
        if n and int(lengths.min()) < width:
            text *= np.arange(width) < lengths[:, None]
        exact |= (text >= 0x80).any(axis=1) | (lengths > width)
        hashes = java_hashes_of_rows(text, np.minimum(lengths, width))
        codes = np.zeros(n, dtype=np.int64)
        topics = cls(codes, hashes, [], {})
        fast = np.flatnonzero(~exact)
        if not len(fast):
            return topics
        _, first, inverse = np.unique((lengths[fast] << 32) | hashes[fast], return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        firsts = fast[first]
        code = np.array([topics.code_of(bytes(text[i, :int(lengths[i])]).decode("ascii")) for i in firsts.tolist()],
                        dtype=np.int64)
        codes[fast] = code[inverse]
        exact[fast[~(text[fast] == text[firsts[inverse]]).all(axis=1)]] = True  # a hash collision
        return topics

    def code_of(self, name: str, *, add: bool = True) -> int:
        code = self.index.get(name)
        if code is None:
            if not add:
                return -1
            code = self.index[name] = len(self.names)
            self.names.append(name)
        return code


@dataclass(frozen=True, slots=True)
class _Properties:
    """Every record's properties as a row of a matrix (bytes past a row's length are whatever
    followed them), split into segments at ``\\x02``: each segment's flat start and end, its row,
    and its first nine bytes."""

    matrix: Array
    seg_start: Array
    seg_end: Array
    seg_row: Array
    word: Array    # the first eight bytes of each segment, little-endian
    ninth: Array

    @classmethod
    def of(cls, buf: Array, records: RecordColumns, exact: Array) -> _Properties:
        """Records with properties longer than the matrix's width are marked ``exact``."""
        n = len(records)
        lengths = records.props_len
        width = min(int(lengths.max()) if n else 0, _MAX_PROPS)
        exact |= lengths > width
        lengths = np.minimum(lengths, width)
        row_width = width + _PAD
        matrix = gather_bytes(buf, records.props_pos, row_width)
        seps = np.flatnonzero(matrix.reshape(-1) == 2)
        sep_row = seps // row_width
        inside = seps - sep_row * row_width < lengths[sep_row]  # not in the bytes after a row's properties
        seps, sep_row = seps[inside], sep_row[inside]
        # row r's segments start at r * row_width and after each of its separators, and end at each
        # separator and at the row's length: with b_r separators before row r, its first segment is
        # number r + b_r, and separator k (of row s) ends segment s + k and starts segment s + k + 1
        before = np.searchsorted(sep_row, np.arange(n + 1))
        first_seg = np.arange(n) + before[:-1]
        count = n + len(seps)
        seg_start = np.empty(count, dtype=np.int64)
        seg_end = np.empty(count, dtype=np.int64)
        k = np.arange(len(seps))
        seg_start[first_seg] = np.arange(n) * row_width
        seg_start[k + sep_row + 1] = seps + 1
        seg_end[k + sep_row] = seps
        seg_end[np.arange(n) + before[1:]] = np.arange(n) * row_width + lengths
        seg_row = np.repeat(np.arange(n), np.diff(before) + 1)
        head = gather(matrix.reshape(-1), seg_start, "V9").view(np.uint8).reshape(-1, 9)
        word = head[:, :8].copy().view("<u8").reshape(-1)
        return cls(matrix, seg_start, seg_end, seg_row, word, head[:, 8].copy())

    def value(self, name: bytes, exact: Array, forbid: int = -1) -> _Value:
        """Where each record's value of the property ``name`` lies (``TAGS\\x01``, ``KEYS\\x01``, or
        the 8-byte ``UNIQ_KEY`` that ``\\x01`` follows). Records naming it twice, or whose value
        holds ``forbid``, are marked ``exact``."""
        n = len(self.matrix)
        if len(name) == 5:
            hit = (self.word & np.uint64(_MASK40)) == np.uint64(_little(name))
            name_size = 5
        else:
            hit = (self.word == np.uint64(_little(name))) & (self.ninth == 1)
            name_size = 9
        value_start = self.seg_start[hit] + name_size
        value_end = self.seg_end[hit]
        valid = value_end > value_start  # an empty value does not count (nor replace an earlier one)
        row, value_start, value_end = self.seg_row[hit][valid], value_start[valid], value_end[valid]
        times = np.bincount(row, minlength=n)
        exact |= times > 1
        present = times == 1
        start = np.zeros(n, dtype=np.int64)
        length = np.zeros(n, dtype=np.int64)
        start[row] = value_start
        length[row] = value_end - value_start
        if forbid >= 0 and len(row):
            text = gather_bytes(self.matrix.reshape(-1), value_start, int(length.max()))
            inside = np.arange(text.shape[1]) < (value_end - value_start)[:, None]
            exact[row[((text == forbid) & inside).any(axis=1)]] = True
        return _Value(present & ~exact, start, length)


@dataclass(frozen=True, slots=True)
class _Value:
    present: Array  # per record
    start: Array    # flat position of the value in the properties matrix
    length: Array


def _value_hashes(props: _Properties, value: _Value, exact: Array) -> Array:
    """Unsigned Java hash of each present value (ASCII only: others mark their record ``exact``)."""
    flat = props.matrix.reshape(-1)
    n = len(value.present)
    hashes = np.zeros(n, dtype=np.int64)
    index = np.flatnonzero(value.present)
    if not len(index):
        return hashes
    lengths = value.length[index]
    width = int(lengths.max())
    text = gather_bytes(flat, value.start[index], width)
    if int(lengths.min()) < width:
        text *= np.arange(width) < lengths[:, None]
    exact[index[(text >= 0x80).any(axis=1)]] = True
    hashes[index] = java_hashes_of_rows(text, lengths)
    return hashes
