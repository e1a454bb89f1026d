"""Record batches encoded by the producer, so the single writer does batch work, not message work.

The producer encodes whole RocketMQ records (``mqstore.engine.log.record``'s layout, body CRC included, the
``__CRC32#`` tail reserved when the store seals records) with the writer's store host as store host
(and as born host unless the message names one). What it cannot know stays zero: queue offset,
phys offset, store time, the whole-record CRC digits, and the queue id when the writer picks it.
Beside the bytes travel per-record columns (``COLUMNS``) and the tables they index:

    column   dtype  meaning
    size     <i4    the record's TOTALSIZE
    topic    <u2    index into the batch's topic table
    queue    <i4    a queue id; -1: round robin; -2: by shard hash
    shard    <i4    the shard key's Java hash, signed, when queue == -2 (``mqstore.engine.put.queue_selector``)
    tag      <i4    index into the batch's tags table, -1 for none (the tags code is the writer's)

plus one string per record for its index keys (space separated, "" for none) and one for its
UNIQ_KEY, which travel as key text (``mqstore.engine.batch.key_text``: one UTF-8 text and its int32 bounds,
no string per record on the wire). The writer answers with one ``REPLY_ROW`` per record written, packed the same way:

    field         dtype  meaning
    phys_offset   <i8    where the record starts in the commitlog
    queue_id      <i4    the queue it went to
    queue_offset  <i8    its entry number in that queue

The producer encodes a batch from its columns in one compiled call (``encode_batch``,
``engine/csrc/encode.c``): no Python frame runs per record. The writer checks every record against
the columns in another (``check_batch``, ``engine/csrc/batch.c``), then stamps the batch in the
mapped file and seals it in a third (``stamp_batch``), so the bytes on disk are the ones
``encode_record`` + ``patch_record`` + ``seal_record`` would have written.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mqstore.engine import _native
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.host import Host
from mqstore.engine.log.message import PutStatus
from mqstore.engine.log.record import (
    SYSFLAG_COMPRESSED,
    SYSFLAG_MULTI_TAGS,
    encode_properties,
)

COLUMNS = np.dtype([("size", "<i4"), ("topic", "<u2"), ("queue", "<i4"), ("shard", "<i4"), ("tag", "<i4")])
REPLY_ROW = np.dtype([("phys_offset", "<i8"), ("queue_id", "<i4"), ("queue_offset", "<i8")])
QUEUE_ROUND_ROBIN = -1
QUEUE_BY_SHARD = -2
CLIENT_SYS_FLAGS = SYSFLAG_COMPRESSED | SYSFLAG_MULTI_TAGS
QUEUE_ID_POS = 12
BODY_CRC_POS = 8
PHYS_OFFSET_POS = 28


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


IntColumn = int | Sequence[int]
_TOPIC_PARTS: dict[str, bytes] = {}  # topic -> its length field and bytes, as a record carries them


def topic_part(topic: str) -> bytes:
    part = _TOPIC_PARTS.get(topic)
    if part is None:
        raw = topic.encode()
        part = (struct.pack(">h", len(raw)) if len(raw) > 127 else bytes((len(raw),))) + raw
        if len(_TOPIC_PARTS) < 4096:
            _TOPIC_PARTS[topic] = part
    return part


PropertyColumn = str | bytes | Sequence[str | bytes]


@dataclass(frozen=True, slots=True)
class PropertyPieces:
    """Each record's properties as the concatenation of its pieces, column by column: a column is one
    piece for every record or one per record, bytes or str (as its UTF-8)."""

    columns: tuple[PropertyColumn, ...]


def encode_batch(bodies: Sequence[bytes], topics: Sequence[str], properties: Sequence[bytes] | PropertyPieces, *,
                 store_host: Host, prop_crc: bool, born_ms: IntColumn, born_hosts: Sequence[bytes] | None = None,
                 queue_ids: IntColumn = 0, flags: IntColumn = 0, sys_flags: IntColumn = 0,
                 reconsume_times: IntColumn = 0) -> tuple[bytes, np.ndarray[Any, Any]]:
    """The records ``encode_one`` would write for each row (``properties`` already encoded, without
    the CRC tail, or as pieces the kernel joins), joined, and their sizes: one compiled call
    (``_native.encode_batch``) over the batch's columns. ``born_hosts`` are packed (None: the store
    host for all); an int stands for a whole column. ValueError for properties over
    MAX_PROPERTIES_SIZE, OverflowError for a queue id, flag or reconsume count outside int32."""
    n = len(bodies)
    if n and topics.count(topics[0]) == n:  # a batch to one topic: one part for all
        parts = [topic_part(topics[0])] * n
    else:
        parts = list(map({t: topic_part(t) for t in dict.fromkeys(topics)}.__getitem__, topics))
    ints = np.empty((5, n), np.int64)
    ints[0] = queue_ids
    ints[1] = flags
    ints[2] = sys_flags
    ints[3] = born_ms
    ints[4] = reconsume_times
    sizes = np.empty(n, np.int64)
    columns = properties.columns if isinstance(properties, PropertyPieces) else (properties,)
    records = _native.encode_batch(bodies, parts, columns, born_hosts, store_host.packed, prop_crc, ints, sizes)
    return records, sizes


def pack_columns(sizes: np.ndarray[Any, Any], *, topic: IntColumn, queue: IntColumn, shard: IntColumn,
                 tag: IntColumn) -> bytes:
    """The batch's ``COLUMNS`` rows, packed (``sizes``: int64); an int stands for a whole column. One
    compiled call (``_native.pack_columns``); OverflowError for a value outside its field."""
    return _native.pack_columns(sizes, topic, queue, shard, tag)


def unpack_reply_rows(packed: bytes) -> tuple[list[int], list[int], list[int]]:
    """Phys offsets, queue ids and queue offsets of packed ``REPLY_ROW``s; ValueError when the bytes
    are not whole rows."""
    if len(packed) % REPLY_ROW.itemsize:
        raise ValueError(f"{len(packed)} bytes are not whole reply rows of {REPLY_ROW.itemsize}")
    rows = np.frombuffer(packed, REPLY_ROW)
    return rows["phys_offset"].tolist(), rows["queue_id"].tolist(), rows["queue_offset"].tolist()


class BatchError(MqstoreError, ValueError):
    """A batch whose records do not match its columns: the whole request is refused."""


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What ``write_batch`` wrote: the first ``len(phys_offsets)`` records, in order; ``failure`` says
    why the rest were not written (PUT_OK when all were)."""

    phys_offsets: np.ndarray[Any, Any]
    queue_offsets: np.ndarray[Any, Any]
    store_ms: int
    failure: tuple[PutStatus, str]


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
    """Every record matches its column and is one ``encode_one`` could have written; raises BatchError
    with the reason of the first check (in ``_native.check_batch``'s order) that a record fails."""
    try:
        parts = _topic_parts(tuple(topics))
        out = np.empty(3 * (len(columns) // COLUMNS.itemsize), np.int64)
        code, detail = _native.check_batch(records, columns, parts[0], parts[1], store_host.packed, prop_crc,
                                           max_body_bytes, out)
    except (ValueError, TypeError, OverflowError) as exc:
        raise BatchError(f"malformed batch: {exc}") from None
    if code:
        raise BatchError(_check_reason(code, detail, records, columns, topics, max_body_bytes))
    starts, store_ms_pos, sys_flags = out.reshape(3, -1)
    return CheckedBatch(np.frombuffer(columns, COLUMNS), starts, store_ms_pos, sys_flags)


_PARTS: dict[tuple[str, ...], tuple[bytes, np.ndarray[Any, Any]]] = {}  # topic tables met so far (at most 64)


def _topic_parts(topics: tuple[str, ...]) -> tuple[bytes, np.ndarray[Any, Any]]:
    """The topics' length fields and bytes joined, and where each ends, as ``_native.check_batch`` takes them."""
    known = _PARTS.get(topics)
    if known is None:
        parts = [topic_part(t) for t in topics]
        known = b"".join(parts), np.cumsum([len(p) for p in parts], dtype=np.int64)
        if len(_PARTS) < 64:
            _PARTS[topics] = known
    return known


# properties the send path's put rules read (mqstore.engine.put.rewrite): a producer-encoded record cannot carry them
SEND_ONLY_PROPERTIES = ("DELAY", "TRAN_MSG", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS")
SEND_ONLY_REFUSAL = ("a record carries DELAY, TRAN_MSG or a timer property (TIMER_DELAY_SEC, TIMER_DELAY_MS, "
                     "TIMER_DELIVER_MS): delayed, transactional and timer messages go through send "
                     "(mqstore.ipc.client.api.Producer.send), whose put rules store them where they wait")
_CHECK_REASONS = {
    1: "the columns are not whole rows",
    3: "a record names a topic outside the batch's table",
    4: "a record's TOTALSIZE differs from its column",
    5: "a record has an illegal magic code",
    6: "a record sets sysFlag bits the writer owns, or another store host family",
    7: "a record carries another store host",
    9: "a record's topic length field is not the width its topic needs",
    11: "a record's lengths do not add up to its size",
    12: "a record lacks the whole-record CRC tail this store seals",
    13: SEND_ONLY_REFUSAL,
    14: "a record's body CRC does not match its body",
}


def _check_reason(code: int, detail: int, records: bytes | memoryview, columns: bytes, topics: Sequence[str],
                  max_body_bytes: int) -> str:
    if code == 2:
        total = int(np.frombuffer(columns, COLUMNS)["size"].sum(dtype=np.int64))
        return f"record sizes add up to {total}, the batch has {len(records)} bytes"
    if code == 8:
        return f"a body length is negative, past its record, or over {max_body_bytes} bytes"
    if code == 10:
        return f"a record's topic is not {topics[detail]!r}"
    return _CHECK_REASONS[code]
