"""The numpy encode, column packing, check and stamp of producer-encoded batches that engine/csrc/encode.c and batch.c
replaced: not a runtime path, only what the property tests hold ``mqstore.engine.batch.record_batch``'s
kernels to, byte for byte (the same records encoded, the same verdicts and reasons, the same stamped
files)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from mqstore.engine.batch.record_batch import (
    CLIENT_SYS_FLAGS,
    COLUMNS,
    PHYS_OFFSET_POS,
    QUEUE_ID_POS,
    SEND_ONLY_PROPERTIES,
    SEND_ONLY_REFUSAL,
    BatchError,
    CheckedBatch,
    IntColumn,
    PropertyPieces,
    topic_part,
)
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import (
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_SIZE,
    PROP_CRC_KEY,
    PROP_CRC_SIZE,
    QUEUE_OFFSET_POS,
    SYSFLAG_BORNHOST_V6,
    SYSFLAG_STOREHOST_V6,
)
from tests.oracle.crc import crc31_spans

_CRC_HEAD = PROP_CRC_KEY.encode() + b"\x01"
_CRC_PLACEHOLDER = _CRC_HEAD + b"0" * 10 + b"\x02"

_DIGIT_POWERS = 10 ** np.arange(10, dtype=np.int64)
_CRC_HEAD_BYTES = np.frombuffer(_CRC_HEAD, np.uint8)
_SPAN = np.arange(128, dtype=np.int64)  # column offsets of a gather
# What the writer stamps, in one scatter: queue id, queue offset, phys offset (their record positions), store time
_STAMPED = np.dtype([("queue_id", ">i4"), ("queue_offset", ">i8"), ("phys_offset", ">i8"), ("store_ms", ">i8")])
_STAMPED_POS = np.r_[QUEUE_ID_POS:QUEUE_ID_POS + 4, QUEUE_OFFSET_POS:PHYS_OFFSET_POS + 8]


def _head_dtype(born_size: int, store_size: int) -> np.dtype[Any]:
    """``mqstore.engine.log.record``'s fields from TOTALSIZE to BODYLENGTH as one packed big-endian row."""
    return np.dtype([("size", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
                     ("queue_offset", ">i8"), ("phys_offset", ">i8"), ("sys_flag", ">i4"), ("born_ms", ">i8"),
                     ("born_host", f"S{born_size}"), ("store_ms", ">i8"), ("store_host", f"S{store_size}"),
                     ("reconsume_times", ">i4"), ("prepared_tx_offset", ">i8"), ("body_length", ">i4")])


_HEADS = {(b, s): _head_dtype(b, s) for b in (8, 20) for s in (8, 20)}
_SHORTS: dict[int, bytes] = {}  # PROPERTIESLENGTH fields met so far (at most 32768)


def encode_batch(bodies: Sequence[bytes], topics: Sequence[str], properties: Sequence[bytes], *, store_host: Host,
                 prop_crc: bool, born_ms: IntColumn, born_hosts: Sequence[bytes] | None = None,
                 queue_ids: IntColumn = 0, flags: IntColumn = 0, sys_flags: IntColumn = 0,
                 reconsume_times: IntColumn = 0) -> tuple[bytes, np.ndarray[Any, Any]]:
    """The records ``encode_one`` would write for each row (``properties`` already encoded, without
    the CRC tail), joined, and their sizes. The fixed fields of all records are one numpy array
    and the batch one join of its pieces: no Python frame per record. ``born_hosts`` are packed
    (None: the store host for all); an int stands for a whole column."""
    if isinstance(properties, PropertyPieces):  # joined here, as the kernel joins them
        properties = _joined(properties, len(bodies))
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



def _joined(pieces: PropertyPieces, n: int) -> list[bytes]:
    columns = [[c] * n if isinstance(c, str | bytes) else list(c) for c in pieces.columns]
    if any(len(c) != n for c in columns):
        raise ValueError("a properties column does not have a piece per record")
    return [b"".join(p.encode() if isinstance(p, str) else p for p in row) for row in zip(*columns, strict=True)]


def _take(buf: np.ndarray[Any, Any], positions: np.ndarray[Any, Any], width: int) -> np.ndarray[Any, Any]:
    """The ``width`` bytes at each of ``positions``, as rows; past the end of ``buf`` they repeat its
    last byte (a record whose lengths run past the batch fails a later check)."""
    return buf.take(positions[:, None] + _SPAN[:width], mode="clip")



_SEND_ONLY_NAMES = frozenset(name.encode() for name in SEND_ONLY_PROPERTIES)


def _carries_send_only(props: bytes) -> bool:
    """A property ``decode_properties`` keeps (a name and a value, neither empty) is a send-only one."""
    return any(name in _SEND_ONLY_NAMES and value
               for name, _, value in (segment.partition(b"\x01") for segment in props.split(b"\x02")))


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
    """Few numpy calls per batch, whatever its size: every record's fixed fields are one gather
    viewed as ``encode_batch``'s header rows, its topic field one gather per topic of the batch."""
    if len(columns) % COLUMNS.itemsize or not columns:
        raise BatchError("the columns are not whole rows")
    cols = np.frombuffer(columns, dtype=COLUMNS)
    sizes = cols["size"].astype(np.int64)
    ends = np.cumsum(sizes)
    if int(sizes.min()) < 84 or int(ends[-1]) != len(records):
        raise BatchError(f"record sizes add up to {int(ends[-1])}, the batch has {len(records)} bytes")
    topic_ids = cols["topic"]
    if int(topic_ids.max()) >= len(topics):
        raise BatchError("a record names a topic outside the batch's table")
    buf = np.frombuffer(records, dtype=np.uint8)
    starts = ends - sizes
    store = store_host.packed
    narrow, wide = _HEADS[(8, len(store))], _HEADS[(20, len(store))]
    grid = _take(buf, starts, wide.itemsize)
    head = np.ascontiguousarray(grid[:, :narrow.itemsize]).view(narrow).ravel()
    sys_flags = head["sys_flag"].astype(np.int64)
    born_v6 = (sys_flags & SYSFLAG_BORNHOST_V6) != 0
    store_hosts, body_len = head["store_host"], head["body_length"].astype(np.int64)
    if born_v6.any():
        wide_head = grid.view(wide).ravel()
        store_hosts = np.where(born_v6, wide_head["store_host"], store_hosts)
        body_len = np.where(born_v6, wide_head["body_length"], body_len)
    magic = head["magic"]
    if (head["size"] != sizes).any():
        raise BatchError("a record's TOTALSIZE differs from its column")
    if ((magic != MAGIC_V1) & (magic != MAGIC_V2)).any():
        raise BatchError("a record has an illegal magic code")
    store_v6 = SYSFLAG_STOREHOST_V6 if len(store) > 8 else 0
    if ((sys_flags & ~(CLIENT_SYS_FLAGS | SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6)) != 0).any() or \
            ((sys_flags & SYSFLAG_STOREHOST_V6) != store_v6).any():
        raise BatchError("a record sets sysFlag bits the writer owns, or another store host family")
    if (store_hosts != store).any():  # fixed-width bytes: numpy's trailing-NUL rule cannot blur them
        raise BatchError("a record carries another store host")
    body_pos = starts + narrow.itemsize + 12 * born_v6
    if (body_len < 0).any() or (body_len > max_body_bytes).any() or (body_pos + body_len > ends).any():
        raise BatchError(f"a body length is negative, past its record, or over {max_body_bytes} bytes")
    parts = [topic_part(t) for t in topics]
    part_len = np.array([len(p) for p in parts], np.int64)[topic_ids]
    if ((magic == MAGIC_V2) != (part_len > 128)).any():
        raise BatchError("a record's topic length field is not the width its topic needs")
    topic_pos = body_pos + body_len
    for index in (range(1) if len(parts) == 1 else np.unique(topic_ids).tolist()):
        rows = topic_pos if len(parts) == 1 else topic_pos[topic_ids == index]
        part = parts[index]
        # a part over 128 bytes (a topic over 126 characters, MAGIC_V2) gathered with _SPAN[:width] came out
        # 128 wide and the batch was refused as malformed; gathered whole it is checked like the others
        # (MAX_TOPIC_LENGTH, 127, refuses such a topic when its queues are picked)
        grid = buf.take(rows[:, None] + np.arange(len(part)), mode="clip")
        if (grid != np.frombuffer(part, np.uint8)).any():
            raise BatchError(f"a record's topic is not {topics[index]!r}")
    props_len_pos = topic_pos + part_len
    props_len = _take(buf, props_len_pos, 2).view(">i2").ravel().astype(np.int64)
    if (props_len < 0).any() or (props_len_pos + 2 + props_len != ends).any():
        raise BatchError("a record's lengths do not add up to its size")
    if prop_crc:
        tail = _take(buf, ends - PROP_CRC_SIZE, PROP_CRC_SIZE)
        if (props_len < PROP_CRC_SIZE).any() or (tail[:, :len(_CRC_HEAD)] != _CRC_HEAD_BYTES).any() or \
                (tail[:, -1] != 2).any():
            raise BatchError("a record lacks the whole-record CRC tail this store seals")
    props_pos = props_len_pos + 2
    if any(_carries_send_only(bytes(buf[start:end]))
           for start, end in zip(props_pos.tolist(), ends.tolist(), strict=True)):
        raise BatchError(SEND_ONLY_REFUSAL)
    if (crc31_spans(records, body_pos, topic_pos) != head["body_crc"]).any():
        raise BatchError("a record's body CRC does not match its body")
    return CheckedBatch(cols, starts, 56 + 12 * born_v6, sys_flags)



def stamp_batch(buf: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any],
                store_ms_pos: np.ndarray[Any, Any], queue_ids: np.ndarray[Any, Any],
                queue_offsets: np.ndarray[Any, Any], phys_offsets: np.ndarray[Any, Any], store_ms: int,
                sealed: bool) -> None:
    """Stamp queue id, queue offset, phys offset and store time into records already copied to ``buf``
    (a mapped file's bytes; ``starts`` are positions in it) in one scatter, then their whole-record
    CRCs."""
    fields = np.empty(len(starts), _STAMPED)
    fields["queue_id"] = queue_ids
    fields["queue_offset"] = queue_offsets
    fields["phys_offset"] = phys_offsets
    fields["store_ms"] = store_ms
    buf[np.concatenate((starts[:, None] + _STAMPED_POS, (starts + store_ms_pos)[:, None] + _SPAN[:8]), axis=1)] = \
        fields.view(np.uint8).reshape(len(starts), _STAMPED.itemsize)
    if not sealed:
        return
    data = memoryview(buf)  # type: ignore[arg-type]
    ends = starts + sizes - PROP_CRC_SIZE
    crcs = crc31_spans(data, starts, ends)
    data.release()
    digits = (crcs[:, None] // _DIGIT_POWERS % 10 + 48).astype(np.uint8)  # least significant first
    buf[(ends + len(_CRC_HEAD))[:, None] + _SPAN[:10]] = digits


def pack_columns(sizes: np.ndarray[Any, Any], *, topic: IntColumn, queue: IntColumn, shard: IntColumn,
                 tag: IntColumn) -> bytes:
    """The batch's ``COLUMNS`` rows, packed; an int stands for a whole column."""
    rows = np.empty(len(sizes), COLUMNS)
    rows["size"] = sizes
    rows["topic"] = topic
    rows["queue"] = queue
    rows["shard"] = shard
    rows["tag"] = tag
    return rows.tobytes()
