"""Commitlog records as Arrow columns: one ``pyarrow.RecordBatch`` of ``mqstore.pipeline.schema.ARROW_SCHEMA``
(or of the columns a ``Projection`` names, and only those decoded) from a ``RecordLayout``, without a
Python object per record.

Properties are split on their ``\\x01``/``\\x02`` separators with numpy; hosts and message ids are
formatted once per distinct host. What this fast path cannot reproduce byte for byte — properties
that are not UTF-8 (the engine decodes them with replacement characters), a property name repeated
in one record — makes ``to_batch`` return None; ``records_to_batch`` then builds the same columns
from ``decode_record``'s Records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from mqstore.engine.batch.record_columns import gather_bytes
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import PROP_CRC_KEY, PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, Record
from mqstore.pipeline.byte_columns import NotExact, as_numpy, binary_values, utf8
from mqstore.pipeline.record_layout import BORN_HOST_POS, RecordLayout
from mqstore.pipeline.schema import ARROW_SCHEMA, FULL, TIMESTAMP_MAX_MS, Projection

Array = npt.NDArray[Any]
_HEX_PAIRS = np.frombuffer(b"".join(b"%02X" % b for b in range(256)), dtype=np.uint8).reshape(256, 2)


def to_batch(buf: Array, layout: RecordLayout, *, read_body: bool = True,
             projection: Projection = FULL) -> pa.RecordBatch | None:
    """The Arrow batch of ``projection``'s columns of every record in ``layout`` (all must be valid),
    or None when only the exact decoder reproduces them (non-UTF-8 text, a repeated property name).
    Only the columns asked for are decoded."""
    fields = _Fields(buf, layout, read_body)
    try:
        arrays = [_BUILD[name](fields) for name in projection.columns]
    except NotExact:
        return None
    return pa.RecordBatch.from_arrays(arrays, schema=projection.arrow_schema)


def records_to_batch(records: Sequence[Record], *, read_body: bool = True,
                     projection: Projection = FULL) -> pa.RecordBatch:
    """The same columns built from decoded Records: the exact path, one Python object per field."""
    types = dict(zip(ARROW_SCHEMA.names, ARROW_SCHEMA.types, strict=True))
    arrays = [pa.array([_FIELD[name](r) for r in records] if name != "body" or read_body else [None] * len(records),
                       types[name]) for name in projection.columns]
    return pa.RecordBatch.from_arrays(arrays, schema=projection.arrow_schema)


_FIELD: dict[str, Callable[[Record], Any]] = {
    "topic": lambda r: r.topic,
    "queue_id": lambda r: r.queue_id,
    "queue_offset": lambda r: r.queue_offset,
    "phys_offset": lambda r: r.phys_offset,
    "size": lambda r: r.size,
    "flag": lambda r: r.flag,
    "sys_flag": lambda r: r.sys_flag,
    "body_crc": lambda r: r.body_crc,
    "tags": lambda r: r.tags,
    "keys": lambda r: r.keys,
    "properties": lambda r: list(r.properties.items()),
    "body": lambda r: r.body,
    "born_timestamp": lambda r: _micros(r.born_ms),
    "born_host": lambda r: str(r.born_host),
    "store_timestamp": lambda r: _micros(r.store_ms),
    "store_host": lambda r: str(r.store_host),
    "reconsume_times": lambda r: r.reconsume_times,
    "prepared_tx_offset": lambda r: r.prepared_tx_offset,
    "msg_id": lambda r: r.msg_id,
    "uniq_key": lambda r: r.uniq_key,
}


class _Fields:
    """What several columns share, parsed at most once a batch: the properties, the store hosts."""

    def __init__(self, buf: Array, layout: RecordLayout, read_body: bool) -> None:
        self.buf, self.layout, self.read_body = buf, layout, read_body
        self._props: _Properties | None = None
        self._store_hosts: tuple[pa.Array, Array] | None = None

    @property
    def props(self) -> _Properties:
        if self._props is None:
            self._props = _Properties.parse(self.buf, self.layout, len(self.layout))
        return self._props

    @property
    def store_hosts(self) -> tuple[pa.Array, Array]:
        if self._store_hosts is None:
            self._store_hosts = _hosts(self.buf, self.layout.store_host_pos, self.layout.store_host_len)
        return self._store_hosts

    def text(self, positions: Array, lengths: Array) -> pa.Array:
        return utf8(binary_values(self.buf, positions, lengths))

    def body(self) -> pa.Array:
        lay = self.layout
        if not self.read_body:
            return pa.nulls(len(lay), pa.binary())
        return binary_values(self.buf, lay.body_pos, lay.body_len)

    def msg_ids(self) -> pa.Array:
        return _msg_ids(self.store_hosts[1], self.layout.store_host_len * 2, self.layout.phys_offset)


def _int32(values: Array) -> pa.Array:
    return pa.array(values, pa.int32())


def _int64(values: Array) -> pa.Array:
    return pa.array(values, pa.int64())


_BUILD: dict[str, Callable[[_Fields], pa.Array]] = {
    "topic": lambda f: f.text(f.layout.topic_pos, f.layout.topic_len),
    "queue_id": lambda f: _int32(f.layout.queue_id),
    "queue_offset": lambda f: _int64(f.layout.queue_offset),
    "phys_offset": lambda f: _int64(f.layout.phys_offset),
    "size": lambda f: _int32(f.layout.size),
    "flag": lambda f: _int32(f.layout.flag),
    "sys_flag": lambda f: _int32(f.layout.sys_flag),
    "body_crc": lambda f: _int32(f.layout.body_crc),
    "tags": lambda f: f.props.value_of(PROP_TAGS),
    "keys": lambda f: f.props.keys_list(),
    "properties": lambda f: f.props.map_array(),
    "body": lambda f: f.body(),
    "born_timestamp": lambda f: _timestamps(f.layout.born_ms),
    "born_host": lambda f: _hosts(f.buf, f.layout.starts + BORN_HOST_POS, f.layout.born_host_len)[0],
    "store_timestamp": lambda f: _timestamps(f.layout.store_ms),
    "store_host": lambda f: f.store_hosts[0],
    "reconsume_times": lambda f: _int32(f.layout.reconsume_times),
    "prepared_tx_offset": lambda f: _int64(f.layout.prepared_tx_offset),
    "msg_id": lambda f: f.msg_ids(),
    "uniq_key": lambda f: f.props.value_of(PROP_UNIQ_KEY),
}


# -- helpers -------------------------------------------------------------------------------------


def _timestamps(ms: Array) -> pa.Array:
    """Milliseconds as UTC microseconds; null where the value cannot be a timestamp at all."""
    bad = np.abs(ms) > TIMESTAMP_MAX_MS
    return pa.array(np.where(bad, 0, ms) * 1000, pa.timestamp("us", tz="UTC"), mask=bad if bad.any() else None)


def _micros(ms: int) -> int | None:
    return ms * 1000 if abs(ms) <= TIMESTAMP_MAX_MS else None


def _hosts(buf: Array, positions: Array, lengths: Array) -> tuple[pa.Array, Array]:
    """("ip:port" strings, each row's packed host in uppercase hex, zero-padded to 40 bytes) for
    hosts of 8 or 20 bytes: each distinct host is formatted once."""
    n = len(positions)
    raw = np.zeros((n, 21), dtype=np.uint8)  # 20 host bytes + a family byte, so v4 and v6 never collide
    raw[:, :20] = gather_bytes(buf, positions, 20)  # one copy a row, not one index a byte
    v4 = lengths == 8
    raw[v4, 8:20] = 0
    raw[:, 20] = v4
    first, inverse = _distinct_rows(raw)
    texts, prefixes = [], np.zeros((len(first), 40), dtype=np.uint8)
    for u, i in enumerate(first.tolist()):
        packed = raw[i, :int(lengths[i])].tobytes()
        texts.append(str(Host.unpack(packed)))
        hexed = packed.hex().upper().encode()
        prefixes[u, :len(hexed)] = np.frombuffer(hexed, dtype=np.uint8)
    inverse = inverse.reshape(-1)
    return pa.array(texts, pa.string()).take(pa.array(inverse, pa.int32())), prefixes[inverse]


def _distinct_rows(raw: Array) -> tuple[Array, Array]:
    """(first index of each distinct row, each row's distinct number) of a (n, 21) byte matrix.
    Rows are hashed to one uint64 (np.unique on raw bytes sorts them as opaque voids: slow); a hash
    collision is caught by comparing every row with its representative."""
    n = len(raw)
    if bool((raw == raw[0]).all()):  # the usual batch: one store host, or a single client
        return np.zeros(1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    padded = np.zeros((n, 24), dtype=np.uint8)
    padded[:, :21] = raw
    words = padded.view(np.uint64)
    key = words[:, 0] * np.uint64(0x9E3779B97F4A7C15) ^ words[:, 1] * np.uint64(0xC2B2AE3D27D4EB4F) ^ words[:, 2]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not bool((raw[first[inverse]] == raw).all()):
        keys = np.ascontiguousarray(raw).view(np.dtype((np.void, 21))).ravel()
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _msg_ids(prefixes: Array, prefix_len: Array, phys_offset: Array) -> pa.Array:
    """offsetMsgId: hex(store host packed) + hex(phys offset as 8 bytes), uppercase."""
    n = len(phys_offset)
    digits = _HEX_PAIRS[phys_offset.astype(">u8").view(np.uint8)].reshape(n, 16)
    width = int(prefix_len[0]) if n else 0
    if bool((prefix_len == width).all()):  # hosts of one family (the usual batch): ids of one width
        out = np.empty((n, width + 16), dtype=np.uint8)
        out[:, :width] = prefixes[:, :width]
        out[:, width:] = digits
        offsets = np.arange(0, (n + 1) * (width + 16), width + 16, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])
    out = np.zeros((n, 56), dtype=np.uint8)
    out[:, :40] = prefixes
    cols = prefix_len[:, None] + np.arange(16)
    np.put_along_axis(out, cols, digits, axis=1)
    lengths = prefix_len + 16
    data = out[np.arange(56) < lengths[:, None]]
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


@dataclass(frozen=True, slots=True)
class _Properties:
    """Every record's properties as flat (record, name, value) runs, in record order, with the
    engine's parsing rules: a segment ends at ``\\x02``; it counts when it has a non-empty name and
    value around its first ``\\x01``; ``__CRC32#`` is dropped."""

    n: int
    record: Array  # record index of each kept pair
    names: pa.Array
    values: pa.Array

    @classmethod
    def parse(cls, buf: Array, layout: RecordLayout, n: int) -> _Properties:
        data, bounds = as_numpy(binary_values(buf, layout.props_pos, layout.props_len))
        seps = np.flatnonzero(data == 2)
        # Segment ends: every \x02 and every record's end, merged in position order (both lists are
        # sorted, so each one's place in the merge is a searchsorted away); at an equal position
        # the record end comes first and the \x02 is the next record's first byte.
        sep_rec = np.searchsorted(bounds[1:], seps, side="right")
        record_slot = np.arange(n) + np.searchsorted(seps, bounds[1:], side="left")
        sep_slot = np.arange(len(seps)) + sep_rec
        end_pos = np.empty(n + len(seps), dtype=np.int64)
        is_sep = np.zeros(n + len(seps), dtype=np.int64)
        end_rec = np.empty(n + len(seps), dtype=np.int64)
        end_pos[record_slot], end_rec[record_slot] = bounds[1:], np.arange(n)
        end_pos[sep_slot], end_rec[sep_slot], is_sep[sep_slot] = seps, sep_rec, 1
        seg_start = np.empty_like(end_pos)
        seg_start[0] = 0
        seg_start[1:] = end_pos[:-1] + is_sep[:-1]
        # a record's first segment starts at its own first byte, whatever came before
        seg_start = np.maximum(seg_start, bounds[end_rec])
        ones = np.flatnonzero(data == 1)
        j = np.searchsorted(ones, seg_start, side="left")
        first_one = np.full(len(seg_start), -1, dtype=np.int64)
        found = j < len(ones)
        first_one[found] = ones[j[found]]
        keep = (first_one > seg_start) & (first_one < end_pos - 1)
        rec, s0, s1, e = end_rec[keep], seg_start[keep], first_one[keep], end_pos[keep]
        names = utf8(binary_values(data, s0, s1 - s0))
        values = utf8(binary_values(data, s1 + 1, e - s1 - 1))
        not_crc = pc.not_equal(names, PROP_CRC_KEY)
        if not bool(pc.all(not_crc).as_py() if len(names) else True):
            mask = not_crc.to_numpy(zero_copy_only=False)
            rec, names, values = rec[mask], names.filter(not_crc), values.filter(not_crc)
        if len(names):
            encoded = pc.dictionary_encode(names)
            codes = encoded.indices.to_numpy().astype(np.int64)
            pair = rec * len(encoded.dictionary) + codes
            bins = n * len(encoded.dictionary)
            repeated = bool(np.bincount(pair, minlength=bins).max() > 1) if bins <= 8 * len(pair) + (1 << 20) \
                else bool((np.diff(np.sort(pair)) == 0).any())
            if repeated:
                raise NotExact  # a name twice in one record: the engine's dict keeps the last value
        return cls(n, rec, names, values)

    def value_of(self, name: str) -> pa.Array:
        """Each record's value of ``name``, null where it has none."""
        hit = np.flatnonzero(pc.equal(self.names, name).to_numpy(zero_copy_only=False)) if len(self.names) \
            else np.zeros(0, dtype=np.int64)
        index = np.full(self.n, -1, dtype=np.int64)
        index[self.record[hit]] = hit
        return self.values.take(pa.array(index, pa.int64(), mask=index < 0))

    def keys_list(self) -> pa.Array:
        """KEYS split on spaces, empty pieces dropped; an empty list where there is no KEYS."""
        keys = pc.fill_null(self.value_of(PROP_KEYS), "")
        pieces = pc.split_pattern(keys, pattern=" ")
        flat = pieces.flatten()
        parent = pc.list_parent_indices(pieces).to_numpy()
        nonempty = pc.greater(pc.binary_length(flat), 0)
        kept_parent = parent[nonempty.to_numpy(zero_copy_only=False)]
        offsets = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(np.bincount(kept_parent, minlength=self.n), out=offsets[1:])
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), flat.filter(nonempty),
                                        type=ARROW_SCHEMA.field("keys").type)

    def map_array(self) -> pa.Array:
        offsets = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(np.bincount(self.record, minlength=self.n), out=offsets[1:])
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), self.names, self.values,
                                       type=ARROW_SCHEMA.field("properties").type)
