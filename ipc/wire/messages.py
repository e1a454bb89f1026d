"""The values the client library hands to and gets from applications, and their wire maps.

Plain frozen dataclasses, so applications need nothing from the engine: a message to send
(``Outgoing``), the broker's answer to one send (``SendResult``), and a stored message as a reader
returns it (``ReceivedMessage``). A pull comes back packed (``MessageBatch``): the reply map holds
``count`` and ``cols``, a column block of little-endian int64s, ``count`` queue offsets, then ``count``
commitlog offsets, then ``count`` sizes (``pack_columns``); the records as stored, back to back,
follow the map as its one binary part (``mqstore.ipc.wire.schema``), so neither msgpack nor the client copies
them (``stored_parts`` builds a reply's fields, ``stored_records`` reads them back); a message is
decoded when it is touched.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, overload

from mqstore.engine import _native
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.message import PutStatus
from mqstore.engine.log.record import Record, decode_record

PUT_OK = PutStatus.PUT_OK
SERVICE_NOT_AVAILABLE = PutStatus.SERVICE_NOT_AVAILABLE
# stored, but a wait failed (the flush; on a SYNC_MASTER, the slaves' copies): RocketMQ's clients
# count these as sent, their SendStatus saying which; a retry would store the message twice
STORED_IN_DOUBT = frozenset({PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
                             PutStatus.SLAVE_NOT_AVAILABLE})
COMPRESSED = 0x1  # sysFlag: the body is zlib-compressed


class ReplyError(MqstoreError, ValueError):
    """A reply that does not have the shape this client expects (a broker of another version)."""


def message_keys(keys: object) -> tuple[str, ...]:
    """A message's keys as the client takes them: a string is one key, a list or tuple of strings is
    several; anything else (bytes, a number, a set, a list holding a non-string) is a TypeError."""
    if isinstance(keys, str):
        return (keys,)
    if isinstance(keys, list | tuple) and all(isinstance(k, str) for k in keys):
        return tuple(keys)
    raise TypeError(f"keys must be a string (one key) or a list or tuple of strings, not {keys!r}")


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to send. ``queue_id`` picks a queue; ``shard`` picks one by hash (ordered messages);
    with neither, the writer goes round robin. Its wire map names the queue ``queue``."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] = ()         # a string given here is one key (``message_keys``)
    properties: Mapping[str, str] = field(default_factory=dict)
    queue_id: int | None = None
    shard: str | None = None
    flag: int = 0
    born_ms: int | None = None
    born_host: tuple[str, int] | None = None
    reconsume_times: int = 0
    sys_flag: int = 0                   # 0x1: the body is compressed (zlib), as RocketMQ clients set it
    prepared_tx_offset: int = 0         # a transaction's commit: its half message's commitlog offset

    def __post_init__(self) -> None:
        if type(self.keys) is not tuple or not all(type(k) is str for k in self.keys):
            object.__setattr__(self, "keys", message_keys(self.keys))

    @classmethod
    def of(cls, value: Outgoing | Mapping[str, Any]) -> Outgoing:
        if isinstance(value, Outgoing):
            return value
        return cls(**value)

    def to_wire(self) -> dict[str, Any]:
        body = self.body.encode() if isinstance(self.body, str) else bytes(self.body)
        wire: dict[str, Any] = {"topic": self.topic, "body": body, "keys": list(self.keys),
                                "props": dict(self.properties), "flag": self.flag,
                                "reconsume_times": self.reconsume_times}
        optional = {"tags": self.tags, "queue": self.queue_id, "shard": self.shard, "born_ms": self.born_ms,
                    "sys_flag": self.sys_flag or None, "prepared_tx_offset": self.prepared_tx_offset or None,
                    "born_host": list(self.born_host) if self.born_host is not None else None}
        wire.update({k: v for k, v in optional.items() if v is not None})
        return wire


def put_status(raw: str, reason: str) -> tuple[PutStatus, str]:
    """A status off the wire, and the reason to keep with it: a status this client does not know (a
    newer broker's) is UNKNOWN_ERROR, the broker's word for it kept at the head of the reason."""
    try:
        return PutStatus(raw), reason
    except ValueError:
        return PutStatus.UNKNOWN_ERROR, f"the broker answered {raw!r}" + (f": {reason}" if reason else "")


@dataclass(frozen=True, slots=True)
class SendResult:
    """The broker's answer to one send: the engine's ``PutResult`` fields under the same names and
    its ``PutStatus`` (a map's ``queue`` is the queue id)."""

    status: PutStatus
    msg_id: str = ""
    queue_id: int = -1
    queue_offset: int = -1
    phys_offset: int = -1
    uniq_key: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == PutStatus.PUT_OK

    @property
    def stored(self) -> bool:
        """Whether the broker stored the message: SEND_OK, or one of ``STORED_IN_DOUBT``."""
        return self.status == PutStatus.PUT_OK or self.status in STORED_IN_DOUBT

    @classmethod
    def from_wire(cls, raw: Any) -> SendResult:
        if not isinstance(raw, dict) or not isinstance(raw.get("status"), str):
            raise ReplyError(f"a send result must be a map with a status, got {raw!r}")
        status, reason = put_status(raw["status"], str(raw.get("reason") or ""))
        try:
            return cls(status, str(raw.get("msg_id") or ""), int(raw.get("queue", -1)),
                       int(raw.get("queue_offset", -1)), int(raw.get("phys_offset", -1)),
                       raw.get("uniq_key"), reason)
        except (TypeError, ValueError) as exc:
            raise ReplyError(f"malformed send result {raw!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """A stored message with every field RocketMQ keeps (MessageExt)."""

    topic: str
    queue_id: int
    queue_offset: int
    phys_offset: int
    size: int
    flag: int
    sys_flag: int
    tags: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str]
    body: bytes
    born_ms: int
    born_host: tuple[str, int]
    store_ms: int
    store_host: tuple[str, int]
    reconsume_times: int
    msg_id: str
    uniq_key: str | None

    @classmethod
    def from_wire(cls, raw: Any) -> ReceivedMessage:
        if not isinstance(raw, dict):
            raise ReplyError(f"a message must be a map, got {type(raw).__name__}")
        try:
            return cls(
                topic=str(raw["topic"]), queue_id=int(raw["queue"]), queue_offset=int(raw["queue_offset"]),
                phys_offset=int(raw["phys_offset"]), size=int(raw["size"]), flag=int(raw["flag"]),
                sys_flag=int(raw["sys_flag"]), tags=raw.get("tags"), keys=tuple(raw.get("keys") or ()),
                properties=dict(raw.get("props") or {}), body=_plain(bytes(raw["body"]), int(raw["sys_flag"])),
                born_ms=int(raw["born_ms"]),
                born_host=_host(raw["born_host"]), store_ms=int(raw["store_ms"]),
                store_host=_host(raw["store_host"]), reconsume_times=int(raw["reconsume_times"]),
                msg_id=str(raw["msg_id"]), uniq_key=raw.get("uniq_key"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplyError(f"malformed message: {exc!r}") from None

    @classmethod
    def from_record(cls, record: Record) -> ReceivedMessage:
        return cls(
            topic=record.topic, queue_id=record.queue_id, queue_offset=record.queue_offset,
            phys_offset=record.phys_offset, size=record.size, flag=record.flag, sys_flag=record.sys_flag,
            tags=record.tags, keys=tuple(record.keys), properties=record.properties,
            body=_plain(record.body, record.sys_flag), born_ms=record.born_ms,
            born_host=(record.born_host.ip, record.born_host.port), store_ms=record.store_ms,
            store_host=(record.store_host.ip, record.store_host.port), reconsume_times=record.reconsume_times,
            msg_id=record.msg_id, uniq_key=record.uniq_key)


_COLUMN = struct.Struct("<q")


def pack_columns(queue_offsets: Sequence[int], phys_offsets: Sequence[int], sizes: Sequence[int]) -> bytes:
    """A packed pull's column block (see the module's docstring)."""
    return struct.pack(f"<{3 * len(sizes)}q", *queue_offsets, *phys_offsets, *sizes)


def stored_parts(data: bytes, queue_offsets: Sequence[int], phys_offsets: Sequence[int], sizes: Sequence[int]
                 ) -> dict[str, Any]:
    """A packed reply's fields: ``count``, ``cols`` (``pack_columns``) and its one part, the records."""
    return {"count": len(sizes), "cols": pack_columns(queue_offsets, phys_offsets, sizes), "parts": [data]}


def stored_records(reply: Mapping[str, Any]) -> tuple[bytes | memoryview, bytes, int]:
    """A packed reply's records (as stored, back to back: its part, as it came, a memoryview of
    ZeroMQ's buffer), column block and count; raises ReplyError when the shapes disagree."""
    parts, cols, count = reply.get("parts"), reply.get("cols"), reply.get("count")
    if not isinstance(parts, list) or len(parts) != 1 or not isinstance(cols, bytes) or type(count) is not int:
        raise ReplyError("a packed reply has an integer count, bytes cols and one part, its records")
    data = parts[0]
    if not isinstance(data, (bytes, memoryview)):
        raise ReplyError("a packed reply's records are bytes")
    if count < 0 or len(cols) != 3 * _COLUMN.size * count:
        raise ReplyError(f"{len(cols)} column bytes for {count} records")
    return data, cols, count


def _int64s(block: bytes | memoryview) -> memoryview:
    """A column of little-endian int64s as a sequence of ints, without copying (the engine's columns
    are native int64s: little-endian hosts only)."""
    return memoryview(block).cast("q")


class MessageBatch(Sequence[ReceivedMessage]):
    """Messages of packed pulls: the stored records, back to back in ``data`` from ``begin`` to ``end``,
    and their columns (int64 views of the reply's column block, so a batch is built, sliced and joined
    without a Python object per message), each decoded into a ``ReceivedMessage`` only when it is touched
    (index, iterate); ``bodies`` and ``body_heads`` read just the bodies, in one kernel call."""

    __slots__ = ("_begin", "_data", "_end", "_phys_offsets", "_queue_offsets", "_sizes", "_starts")

    def __init__(self, data: bytes | memoryview, begin: int, sizes: memoryview, queue_offsets: memoryview,
                 phys_offsets: memoryview, end: int | None = None) -> None:
        self._data = data
        self._begin = begin
        self._end = begin + _native.packed_extent(sizes)[0] if end is None else end
        self._sizes = sizes
        self._queue_offsets = queue_offsets
        self._phys_offsets = phys_offsets
        self._starts: list[int] | None = None  # each record's start, when one is decoded

    @classmethod
    def empty(cls) -> MessageBatch:
        return cls(b"", 0, _EMPTY, _EMPTY, _EMPTY, 0)

    @classmethod
    def from_reply(cls, reply: Mapping[str, Any]) -> MessageBatch:
        """A packed reply's records and columns (``stored_records``); raises ReplyError when they disagree."""
        return cls.from_packed(*stored_records(reply))

    @classmethod
    def from_packed(cls, data: bytes | memoryview, cols: bytes, count: int) -> MessageBatch:
        """Records as stored, back to back, and their column block (``pack_columns``) of ``count``
        records; raises ReplyError when they disagree."""
        columns = _int64s(cols)
        sizes = columns[2 * count:]
        try:
            total, short_at = _native.packed_extent(sizes)
        except ValueError as exc:
            raise ReplyError(str(exc)) from None
        if short_at >= 0:
            raise ReplyError(f"a record of {sizes[short_at]} bytes")
        if total != len(data):
            raise ReplyError(f"{len(data)} record bytes, the columns say {total}")
        return cls(data, 0, sizes, columns[:count], columns[count:2 * count], len(data))

    @classmethod
    def join(cls, batches: Sequence[MessageBatch]) -> MessageBatch:
        """One batch of several, in their order."""
        if len(batches) == 1:
            return batches[0]
        data = b"".join([memoryview(batch._data)[batch._begin:batch._end] for batch in batches])
        return cls(data, 0, _int64s(b"".join([batch._sizes for batch in batches])),
                   _int64s(b"".join([batch._queue_offsets for batch in batches])),
                   _int64s(b"".join([batch._phys_offsets for batch in batches])), len(data))

    @property
    def queue_offsets(self) -> list[int]:
        return self._queue_offsets.tolist()

    @property
    def phys_offsets(self) -> list[int]:
        return self._phys_offsets.tolist()

    def queue_offset(self, index: int) -> int:
        """Message ``index``'s queue offset (``queue_offsets[index]`` without the list)."""
        return int(self._queue_offsets[index])

    def __len__(self) -> int:
        return len(self._sizes)

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same messages in the same order (a list of them, a batch)."""
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so no more hashable than one

    @property
    def stored_bytes(self) -> int:
        """The records' size as stored (what a pull's byte limits count)."""
        return self._end - self._begin

    @overload
    def __getitem__(self, index: int) -> ReceivedMessage: ...

    @overload
    def __getitem__(self, index: slice) -> MessageBatch: ...

    def __getitem__(self, index: int | slice) -> ReceivedMessage | MessageBatch:
        if isinstance(index, slice):
            first, stop, step = index.indices(len(self._sizes))
            if step != 1:  # records back to back: one batch of each message taken
                return MessageBatch.join([self[i:i + 1] for i in range(first, stop, step)] or [MessageBatch.empty()])
            begin = self._begin + _native.packed_extent(self._sizes[:first])[0]
            return MessageBatch(self._data, begin, self._sizes[index], self._queue_offsets[index],
                                self._phys_offsets[index])
        size = self._sizes[index]  # IndexError outside the batch, as a list's
        if self._starts is None:
            self._starts = list(accumulate(self._sizes, initial=self._begin))
        decoded = decode_record(self._data, self._starts[index if index >= 0 else index + len(self)], check_crc=False)
        if decoded.record is None or decoded.record.size != size:
            raise ReplyError(f"message {index} of a packed reply does not decode: {decoded.reason}")
        return ReceivedMessage.from_record(decoded.record)

    def __iter__(self) -> Iterator[ReceivedMessage]:
        for i in range(len(self._sizes)):
            yield self[i]

    def since(self, queue_offset: int) -> MessageBatch:
        """The messages at ``queue_offset`` and after (queue offsets ascend within a queue's pull)."""
        skip = 0
        while skip < len(self._queue_offsets) and self._queue_offsets[skip] < queue_offset:
            skip += 1
        return self[skip:] if skip else self

    def bodies(self) -> list[bytes]:
        """Every message's body as its producer gave it (inflated when compressed), nothing else decoded."""
        try:
            out, compressed = _native.packed_bodies(self._data, self._begin, self._sizes)
        except ValueError as exc:
            raise ReplyError(str(exc)) from None
        for i in compressed:
            out[i] = _plain(out[i], COMPRESSED)
        return out

    def body_heads(self, width: int) -> bytes:
        """The first ``width`` bytes of every body as its producer gave it, back to back (a column of
        fixed-width stamps in one call); ReplyError when a body is shorter, or as ``bodies``."""
        try:
            heads, compressed = _native.packed_body_heads(self._data, self._begin, self._sizes, width)
        except ValueError as exc:
            raise ReplyError(str(exc)) from None
        if not compressed:
            return heads
        out = bytearray(heads)
        for i in compressed:
            body = self[i:i + 1].bodies()[0]
            if len(body) < width:
                raise ReplyError(f"body {i} has {len(body)} bytes, fewer than a head's {width}")
            out[i * width:(i + 1) * width] = body[:width]
        return bytes(out)


_EMPTY = _int64s(b"")


def _plain(body: bytes, sys_flag: int) -> bytes:
    """The body as its producer gave it: RocketMQ clients zlib-compress large bodies and mark them
    (sysFlag 0x1); a body that does not inflate is handed over as stored rather than lost."""
    if not sys_flag & COMPRESSED:
        return body
    try:
        return zlib.decompress(body)
    except zlib.error:
        return body


def _host(raw: Any) -> tuple[str, int]:
    ip, port = raw
    return str(ip), int(port)


def record_to_wire(record: Record) -> dict[str, Any]:
    """A record as the reader sends it (``ReceivedMessage.from_wire`` reads it back)."""
    return {
        "topic": record.topic, "queue": record.queue_id, "queue_offset": record.queue_offset,
        "phys_offset": record.phys_offset, "size": record.size, "flag": record.flag, "sys_flag": record.sys_flag,
        "tags": record.tags, "keys": record.keys, "props": dict(record.properties), "body": record.body,
        "born_ms": record.born_ms, "born_host": [record.born_host.ip, record.born_host.port],
        "store_ms": record.store_ms, "store_host": [record.store_host.ip, record.store_host.port],
        "reconsume_times": record.reconsume_times, "msg_id": record.msg_id, "uniq_key": record.uniq_key,
    }
