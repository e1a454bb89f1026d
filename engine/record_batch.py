"""Record batches encoded by the producer, so the single writer does batch work, not message work.

The producer encodes whole RocketMQ records (``engine.record``'s layout, body CRC included, the
``__CRC32#`` tail reserved when the store seals records) with the writer's store host as store host
(and as born host unless the message names one). What it cannot know stays zero: queue offset,
phys offset, store time, the whole-record CRC digits, and the queue id when the writer picks it.
Beside the bytes travel per-record columns (``COLUMNS``) and the tables they index:

    column   dtype  meaning
    size     <i4    the record's TOTALSIZE
    topic    <u2    index into the batch's topic table
    queue    <i4    a queue id; -1: round robin; -2: by shard hash
    shard    <i4    abs(java_hash(shard key)) when queue == -2
    tag      <i4    index into the batch's tags table, -1 for none (the tags code is the writer's)

plus one string per record for its index keys (space separated, "" for none) and one for its
UNIQ_KEY. The writer checks every record against the columns with numpy (``check_batch``), then
stamps the batch in the mapped file and seals it (``stamp_batch``), so the bytes on disk are the ones
``encode_record`` + ``patch_record`` + ``seal_record`` would have written.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.host import Host
from engine.record import (
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_SIZE,
    PROP_CRC_KEY,
    PROP_CRC_SIZE,
    QUEUE_OFFSET_POS,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_COMPRESSED,
    SYSFLAG_MULTI_TAGS,
    SYSFLAG_STOREHOST_V6,
    encode_properties,
)

COLUMNS = np.dtype([("size", "<i4"), ("topic", "<u2"), ("queue", "<i4"), ("shard", "<i4"), ("tag", "<i4")])
QUEUE_ROUND_ROBIN = -1
QUEUE_BY_SHARD = -2
CLIENT_SYS_FLAGS = SYSFLAG_COMPRESSED | SYSFLAG_MULTI_TAGS
QUEUE_ID_POS = 12
BODY_CRC_POS = 8
PHYS_OFFSET_POS = 28
_CRC_HEAD = PROP_CRC_KEY.encode() + b"\x01"
_CRC_PLACEHOLDER = _CRC_HEAD + b"0" * 10 + b"\x02"
_DIGIT_POWERS = 10 ** np.arange(10, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """What a producer sends: records, their columns, and the tables the columns index."""

    records: bytes
    columns: bytes
    topics: list[str]
    tags: list[str]
    keys: list[str]
    uniq_keys: list[str]

    @property
    def count(self) -> int:
        return len(self.columns) // COLUMNS.itemsize


def encode_one(topic: str, body: bytes, properties: dict[str, str], queue_id: int, flag: int, sys_flag: int,
               born_ms: int, born_host: Host, store_host: Host, reconsume_times: int, prop_crc: bool) -> bytes:
    """One record as ``encode_record`` lays it out, with the writer's fields zero."""
    return encode_batch([body], [topic], [encode_properties(properties)], store_host=store_host, prop_crc=prop_crc,
                        born_ms=born_ms, born_hosts=[born_host.packed], queue_ids=queue_id, flags=flag,
                        sys_flags=sys_flag, reconsume_times=reconsume_times)[0]


def _head_dtype(born_size: int, store_size: int) -> np.dtype[Any]:
    """``engine.record``'s fields from TOTALSIZE to BODYLENGTH as one packed big-endian row."""
    return np.dtype([("size", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
                     ("queue_offset", ">i8"), ("phys_offset", ">i8"), ("sys_flag", ">i4"), ("born_ms", ">i8"),
                     ("born_host", f"S{born_size}"), ("store_ms", ">i8"), ("store_host", f"S{store_size}"),
                     ("reconsume_times", ">i4"), ("prepared_tx_offset", ">i8"), ("body_length", ">i4")])


_HEADS = {(b, s): _head_dtype(b, s) for b in (8, 20) for s in (8, 20)}
_SHORTS: dict[int, bytes] = {}  # PROPERTIESLENGTH fields met so far (at most 32768)
_TOPIC_PARTS: dict[str, bytes] = {}  # topic -> its length field and bytes, as a record carries them
IntColumn = int | Sequence[int]


def topic_part(topic: str) -> bytes:
    part = _TOPIC_PARTS.get(topic)
    if part is None:
        raw = topic.encode()
        part = (struct.pack(">h", len(raw)) if len(raw) > 127 else bytes((len(raw),))) + raw
        if len(_TOPIC_PARTS) < 4096:
            _TOPIC_PARTS[topic] = part
    return part


def encode_batch(bodies: Sequence[bytes], topics: Sequence[str], properties: Sequence[bytes], *, store_host: Host,
                 prop_crc: bool, born_ms: IntColumn, born_hosts: Sequence[bytes] | None = None,
                 queue_ids: IntColumn = 0, flags: IntColumn = 0, sys_flags: IntColumn = 0,
                 reconsume_times: IntColumn = 0) -> tuple[bytes, np.ndarray[Any, Any]]:
    """The records ``encode_one`` would write for each row (``properties`` already encoded, without
    the CRC tail), joined, and their sizes. The fixed fields of all records are one numpy array
    and the batch one join of its pieces: no Python frame per record. ``born_hosts`` are packed
    (None: the store host for all); an int stands for a whole column."""
    n = len(bodies)
    store = store_host.packed
    born_size = len(born_hosts[0]) if born_hosts else len(store)
    if born_hosts and any(len(b) != born_size for b in born_hosts):  # both families in one batch: rare
        rows = [encode_batch([body], [topic], [props], store_host=store_host, prop_crc=prop_crc, born_ms=[ms],
                             born_hosts=[born], queue_ids=[q], flags=[f], sys_flags=[sf], reconsume_times=[r])
                for body, topic, props, ms, born, q, f, sf, r in zip(
                    bodies, topics, properties, _column(born_ms, n), born_hosts, _column(queue_ids, n),
                    _column(flags, n), _column(sys_flags, n), _column(reconsume_times, n), strict=True)]
        return b"".join(r for r, _ in rows), np.concatenate([s for _, s in rows])
    parts = list(map({t: topic_part(t) for t in dict.fromkeys(topics)}.__getitem__, topics))
    body_lens = np.fromiter(map(len, bodies), np.int64, n)
    props_lens = np.fromiter(map(len, properties), np.int64, n) + (PROP_CRC_SIZE if prop_crc else 0)
    if n and int(props_lens.max()) > MAX_PROPERTIES_SIZE:
        raise ValueError(f"properties over {MAX_PROPERTIES_SIZE} bytes")
    head = np.zeros(n, _HEADS[(born_size, len(store))])
    sizes = head.dtype.itemsize + body_lens + np.fromiter(map(len, parts), np.int64, n) + 2 + props_lens
    head["size"] = sizes
    head["magic"] = MAGIC_V1
    if any(len(p) > 128 for p in set(parts)):
        head["magic"] = np.where(np.fromiter(map(len, parts), np.int64, n) > 128, MAGIC_V2, MAGIC_V1)
    head["body_crc"] = np.fromiter(map(zlib.crc32, bodies), np.int64, n) & 0x7FFFFFFF
    head["queue_id"] = queue_ids
    head["flag"] = flags
    v6 = (SYSFLAG_BORNHOST_V6 if born_size > 8 else 0) | (SYSFLAG_STOREHOST_V6 if len(store) > 8 else 0)
    head["sys_flag"] = np.asarray(sys_flags, np.int64) & ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6) | v6
    head["born_ms"] = born_ms
    head["born_host"] = born_hosts if born_hosts else store
    head["store_host"] = store
    head["reconsume_times"] = reconsume_times
    head["body_length"] = body_lens
    width = head.dtype.itemsize
    heads = head.tobytes()
    lens = props_lens.tolist()
    missing = set(lens).difference(_SHORTS)
    if missing:
        _SHORTS.update((v, struct.pack(">h", v)) for v in missing)
    per = 6 if prop_crc else 5
    pieces: list[bytes] = [b""] * (per * n)
    pieces[0::per] = [heads[i:i + width] for i in range(0, n * width, width)]  # a comprehension slices fastest
    pieces[1::per] = bodies
    pieces[2::per] = parts
    pieces[3::per] = map(_SHORTS.__getitem__, lens)
    pieces[4::per] = properties
    if prop_crc:
        pieces[5::per] = [_CRC_PLACEHOLDER] * n
    return b"".join(pieces), sizes


def _column(value: IntColumn, n: int) -> Sequence[int]:
    return [value] * n if isinstance(value, int) else value


class BatchError(ValueError):
    """A batch whose records do not match its columns: the whole request is refused."""


def _gather(buf: np.ndarray[Any, Any], positions: np.ndarray[Any, Any], width: int) -> np.ndarray[Any, Any]:
    return buf[positions[:, None] + np.arange(width)]


def gather_int(buf: np.ndarray[Any, Any], positions: np.ndarray[Any, Any], dtype: str) -> np.ndarray[Any, Any]:
    """Big-endian ints at ``positions`` (``>i2``, ``>i4`` or ``>i8``), as int64."""
    width = np.dtype(dtype).itemsize
    return np.ascontiguousarray(_gather(buf, positions, width)).view(dtype).ravel().astype(np.int64)


def scatter_int(buf: np.ndarray[Any, Any], positions: np.ndarray[Any, Any], values: np.ndarray[Any, Any],
                dtype: str) -> None:
    width = np.dtype(dtype).itemsize
    buf[positions[:, None] + np.arange(width)] = np.asarray(values).astype(dtype).view(np.uint8).reshape(-1, width)


@dataclass(frozen=True, slots=True)
class CheckedBatch:
    """A batch that passed ``check_batch``: record starts within the batch and each record's store
    time position (relative to its start)."""

    columns: np.ndarray[Any, Any]
    starts: np.ndarray[Any, Any]
    store_ms_pos: np.ndarray[Any, Any]
    sys_flags: np.ndarray[Any, Any]


def check_batch(records: bytes | memoryview, columns: bytes, topics: Sequence[str], *, store_host: Host,
                prop_crc: bool, max_body_bytes: int) -> CheckedBatch:
    """Every record matches its column and is one ``encode_one`` could have written; raises BatchError."""
    try:
        return _check(records, columns, topics, store_host, prop_crc, max_body_bytes)
    except (IndexError, ValueError, TypeError) as exc:
        if isinstance(exc, BatchError):
            raise
        raise BatchError(f"malformed batch: {exc}") from None


def _check(records: bytes | memoryview, columns: bytes, topics: Sequence[str], store_host: Host, prop_crc: bool,
           max_body_bytes: int) -> CheckedBatch:
    if len(columns) % COLUMNS.itemsize or not columns:
        raise BatchError("the columns are not whole rows")
    cols = np.frombuffer(columns, dtype=COLUMNS)
    sizes = cols["size"].astype(np.int64)
    if (sizes < 84).any() or int(sizes.sum()) != len(records):
        raise BatchError(f"record sizes add up to {int(sizes.sum())}, the batch has {len(records)} bytes")
    if int(cols["topic"].max()) >= len(topics):
        raise BatchError("a record names a topic outside the batch's table")
    buf = np.frombuffer(records, dtype=np.uint8)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    head = np.ascontiguousarray(_gather(buf, starts, 40)).view(">i4")  # size .. sysflag, as 10 ints
    magic, sys_flags = head[:, 1].astype(np.int64), head[:, 9].astype(np.int64)
    if (head[:, 0] != sizes).any():
        raise BatchError("a record's TOTALSIZE differs from its column")
    if ((magic != MAGIC_V1) & (magic != MAGIC_V2)).any():
        raise BatchError("a record has an illegal magic code")
    store_bytes = store_host.packed
    store_v6 = SYSFLAG_STOREHOST_V6 if len(store_bytes) > 8 else 0
    if ((sys_flags & ~(CLIENT_SYS_FLAGS | SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)) != 0).any() or \
            ((sys_flags & SYSFLAG_STOREHOST_V6) != store_v6).any():
        raise BatchError("a record sets sysFlag bits the writer owns, or another store host family")
    born_len = np.where(sys_flags & SYSFLAG_BORNHOST_V6, 20, 8)
    store_ms_pos = 48 + born_len
    store_host_pos = starts + store_ms_pos + 8
    if (_gather(buf, store_host_pos, len(store_bytes)) != np.frombuffer(store_bytes, np.uint8)).any():
        raise BatchError("a record carries another store host")
    body_pos = store_host_pos + len(store_bytes) + 16
    body_len = gather_int(buf, body_pos - 4, ">i4")
    if (body_len < 0).any() or (body_len > max_body_bytes).any() or (body_pos + body_len > starts + sizes).any():
        raise BatchError(f"a body length is negative, past its record, or over {max_body_bytes} bytes")
    v2 = magic == MAGIC_V2
    topic_len_pos = body_pos + body_len
    topic_len = np.where(v2, gather_int(buf, np.minimum(topic_len_pos, len(buf) - 2), ">i2"),
                         buf[np.minimum(topic_len_pos, len(buf) - 1)].astype(np.int64))
    table_len = np.array([len(t.encode()) for t in topics], dtype=np.int64)[cols["topic"]]
    if (topic_len != table_len).any() or (v2 != (table_len > 127)).any():
        raise BatchError("a record's topic length differs from its topic")
    props_len_pos = topic_len_pos + np.where(v2, 2, 1) + topic_len
    props_len = gather_int(buf, np.minimum(props_len_pos, len(buf) - 2), ">i2")
    if (props_len < 0).any() or (props_len_pos + 2 + props_len != starts + sizes).any():
        raise BatchError("a record's lengths do not add up to its size")
    names = [t.encode() for t in topics]
    for index in np.unique(cols["topic"]):
        rows = np.flatnonzero(cols["topic"] == index)
        name = names[int(index)]
        if (_gather(buf, topic_len_pos[rows] + np.where(v2[rows], 2, 1), len(name)) != np.frombuffer(name, np.uint8)
                ).any():
            raise BatchError(f"a record's topic is not {name.decode()!r}")
    if prop_crc:
        tail = _gather(buf, starts + sizes - PROP_CRC_SIZE, len(_CRC_HEAD))
        if (props_len < PROP_CRC_SIZE).any() or (tail != np.frombuffer(_CRC_HEAD, np.uint8)).any() or \
                (buf[starts + sizes - 1] != 2).any():
            raise BatchError("a record lacks the whole-record CRC tail this store seals")
    view = memoryview(records)
    crcs = _crcs(view, body_pos, body_pos + body_len)
    if (crcs != head[:, 2]).any():
        raise BatchError("a record's body CRC does not match its body")
    return CheckedBatch(cols, starts, store_ms_pos, sys_flags)


def _crcs(data: memoryview, starts: np.ndarray[Any, Any], ends: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """RocketMQ's CRC (zlib's, low 31 bits) of each ``data[start:end]``; the loop runs in C, no
    Python frame per record."""
    views = map(data.__getitem__, map(slice, starts.tolist(), ends.tolist()))
    return np.fromiter(map(zlib.crc32, views), np.int64, len(starts)) & 0x7FFFFFFF


def stamp_batch(buf: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any],
                store_ms_pos: np.ndarray[Any, Any], queue_ids: np.ndarray[Any, Any],
                queue_offsets: np.ndarray[Any, Any], phys_offsets: np.ndarray[Any, Any], store_ms: int,
                sealed: bool) -> None:
    """Stamp queue id, queue offset, phys offset and store time into records already copied to ``buf``
    (a mapped file's bytes; ``starts`` are positions in it), then their whole-record CRCs."""
    scatter_int(buf, starts + QUEUE_ID_POS, queue_ids, ">i4")
    scatter_int(buf, starts + QUEUE_OFFSET_POS, queue_offsets, ">i8")
    scatter_int(buf, starts + PHYS_OFFSET_POS, phys_offsets, ">i8")
    scatter_int(buf, starts + store_ms_pos, np.full(len(starts), store_ms, np.int64), ">i8")
    if not sealed:
        return
    data = memoryview(buf)  # type: ignore[arg-type]
    ends = starts + sizes - PROP_CRC_SIZE
    crcs = _crcs(data, starts, ends)
    data.release()
    digits = (crcs[:, None] // _DIGIT_POWERS % 10 + 48).astype(np.uint8)  # least significant first
    buf[(ends + len(_CRC_HEAD))[:, None] + np.arange(10)] = digits
