"""The values the client library hands to and gets from applications, and their wire maps.

Plain frozen dataclasses, so applications need nothing from the engine: a message to send
(``Outgoing``), the broker's answer to one send (``SendResult``), and a stored message as a reader
returns it (``ReceivedMessage``). A pull comes back packed (``MessageBatch``): the records as stored,
back to back, and a column block, little-endian int64s, ``count`` queue offsets, then ``count``
commitlog offsets, then ``count`` sizes (``pack_columns``); a message is decoded when it is touched.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from engine.log.record import SYSFLAG_POS, Record, body_length_pos, decode_record

PUT_OK = "PUT_OK"
SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
COMPRESSED = 0x1  # sysFlag: the body is zlib-compressed


class ReplyError(ValueError):
    """A reply that does not have the shape this client expects (a broker of another version)."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to send. ``queue`` picks a queue; ``shard`` picks one by hash (ordered messages);
    with neither, the writer goes round robin."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    queue: int | None = None
    shard: str | None = None
    flag: int = 0
    born_ms: int | None = None
    born_host: tuple[str, int] | None = None
    reconsume_times: int = 0
    sys_flag: int = 0                   # 0x1: the body is compressed (zlib), as RocketMQ clients set it
    prepared_tx_offset: int = 0         # a transaction's commit: its half message's commitlog offset

    @classmethod
    def of(cls, value: Outgoing | Mapping[str, Any]) -> Outgoing:
        if isinstance(value, Outgoing):
            return value
        return cls(**value)

    def to_wire(self) -> dict[str, Any]:
        body = self.body.encode() if isinstance(self.body, str) else bytes(self.body)
        if isinstance(self.keys, str):
            raise TypeError("keys must be a sequence of strings, not one string")
        wire: dict[str, Any] = {"topic": self.topic, "body": body, "keys": list(self.keys),
                                "props": dict(self.properties), "flag": self.flag,
                                "reconsume_times": self.reconsume_times}
        optional = {"tags": self.tags, "queue": self.queue, "shard": self.shard, "born_ms": self.born_ms,
                    "sys_flag": self.sys_flag or None, "prepared_tx_offset": self.prepared_tx_offset or None,
                    "born_host": list(self.born_host) if self.born_host is not None else None}
        wire.update({k: v for k, v in optional.items() if v is not None})
        return wire


@dataclass(frozen=True, slots=True)
class SendResult:
    """The broker's answer to one send: the engine's ``PutResult`` fields under the same names, the
    status as its string (what the wire carries; a map's ``queue`` is the queue id)."""

    status: str
    msg_id: str = ""
    queue_id: int = -1
    queue_offset: int = -1
    phys_offset: int = -1
    uniq_key: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == PUT_OK

    @classmethod
    def from_wire(cls, raw: Any) -> SendResult:
        if not isinstance(raw, dict) or not isinstance(raw.get("status"), str):
            raise ReplyError(f"a send result must be a map with a status, got {raw!r}")
        try:
            return cls(raw["status"], str(raw.get("msg_id") or ""), int(raw.get("queue", -1)),
                       int(raw.get("queue_offset", -1)), int(raw.get("phys_offset", -1)),
                       raw.get("uniq_key"), str(raw.get("reason") or ""))
        except (TypeError, ValueError) as exc:
            raise ReplyError(f"malformed send result {raw!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """A stored message with every field RocketMQ keeps (MessageExt)."""

    topic: str
    queue: int
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
                topic=str(raw["topic"]), queue=int(raw["queue"]), queue_offset=int(raw["queue_offset"]),
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
            topic=record.topic, queue=record.queue_id, queue_offset=record.queue_offset,
            phys_offset=record.phys_offset, size=record.size, flag=record.flag, sys_flag=record.sys_flag,
            tags=record.tags, keys=tuple(record.keys), properties=record.properties,
            body=_plain(record.body, record.sys_flag), born_ms=record.born_ms,
            born_host=(record.born_host.ip, record.born_host.port), store_ms=record.store_ms,
            store_host=(record.store_host.ip, record.store_host.port), reconsume_times=record.reconsume_times,
            msg_id=record.msg_id, uniq_key=record.uniq_key)


_COLUMN = struct.Struct("<q")
_INT = struct.Struct(">i")


def pack_columns(queue_offsets: Sequence[int], phys_offsets: Sequence[int], sizes: Sequence[int]) -> bytes:
    """A packed pull's column block (see the module's docstring)."""
    return struct.pack(f"<{3 * len(sizes)}q", *queue_offsets, *phys_offsets, *sizes)


class MessageBatch(Sequence[ReceivedMessage]):
    """Messages of packed pulls: the stored records and their columns, each decoded into a
    ``ReceivedMessage`` only when it is touched (index, iterate); ``bodies`` reads just the bodies."""

    __slots__ = ("_data", "_sizes", "_starts", "phys_offsets", "queue_offsets")

    def __init__(self, data: bytes, starts: list[int], sizes: list[int], queue_offsets: list[int],
                 phys_offsets: list[int]) -> None:
        self._data = data
        self._starts = starts
        self._sizes = sizes
        self.queue_offsets = queue_offsets
        self.phys_offsets = phys_offsets

    @classmethod
    def empty(cls) -> MessageBatch:
        return cls(b"", [], [], [], [])

    @classmethod
    def from_reply(cls, reply: Mapping[str, Any]) -> MessageBatch:
        """A pull reply's ``raw``, ``count`` and ``cols``; raises ReplyError when they disagree."""
        data, count, cols = reply.get("raw"), reply.get("count"), reply.get("cols")
        if not isinstance(data, bytes) or not isinstance(cols, bytes) or type(count) is not int:
            raise ReplyError("a packed reply has bytes raw, an integer count and bytes cols")
        if count < 0 or len(cols) != 3 * _COLUMN.size * count:
            raise ReplyError(f"{len(cols)} column bytes for {count} records")
        columns = list(struct.unpack(f"<{3 * count}q", cols))
        sizes = columns[2 * count:]
        starts: list[int] = []
        pos = 0
        for size in sizes:
            if size < 8:
                raise ReplyError(f"a record of {size} bytes")
            starts.append(pos)
            pos += size
        if pos != len(data):
            raise ReplyError(f"{len(data)} record bytes, the columns say {pos}")
        return cls(data, starts, sizes, columns[:count], columns[count:2 * count])

    @classmethod
    def join(cls, batches: Sequence[MessageBatch]) -> MessageBatch:
        """One batch of several, in their order."""
        if len(batches) == 1:
            return batches[0]
        data = bytearray()
        starts: list[int] = []
        sizes: list[int] = []
        queue_offsets: list[int] = []
        phys_offsets: list[int] = []
        for batch in batches:
            base = len(data) - (batch._starts[0] if batch._starts else 0)
            if batch._starts:
                data += memoryview(batch._data)[batch._starts[0]:batch._starts[-1] + batch._sizes[-1]]
            starts.extend(start + base for start in batch._starts)
            sizes.extend(batch._sizes)
            queue_offsets.extend(batch.queue_offsets)
            phys_offsets.extend(batch.phys_offsets)
        return cls(bytes(data), starts, sizes, queue_offsets, phys_offsets)

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
        return sum(self._sizes)

    @overload
    def __getitem__(self, index: int) -> ReceivedMessage: ...

    @overload
    def __getitem__(self, index: slice) -> MessageBatch: ...

    def __getitem__(self, index: int | slice) -> ReceivedMessage | MessageBatch:
        if isinstance(index, slice):
            return MessageBatch(self._data, self._starts[index], self._sizes[index], self.queue_offsets[index],
                                self.phys_offsets[index])
        decoded = decode_record(self._data, self._starts[index], check_crc=False)
        if decoded.record is None or decoded.record.size != self._sizes[index]:
            raise ReplyError(f"message {index} of a packed reply does not decode: {decoded.reason}")
        return ReceivedMessage.from_record(decoded.record)

    def __iter__(self) -> Iterator[ReceivedMessage]:
        for i in range(len(self._sizes)):
            yield self[i]

    def since(self, queue_offset: int) -> MessageBatch:
        """The messages at ``queue_offset`` and after (queue offsets ascend within a queue's pull)."""
        skip = 0
        while skip < len(self.queue_offsets) and self.queue_offsets[skip] < queue_offset:
            skip += 1
        return self[skip:] if skip else self

    def bodies(self) -> list[bytes]:
        """Every message's body as its producer gave it (inflated when compressed), nothing else decoded."""
        data, out = self._data, []
        try:
            for start, size in zip(self._starts, self._sizes, strict=True):
                if _INT.unpack_from(data, start)[0] != size:
                    raise ReplyError(f"no {size}-byte record at byte {start} of a packed reply")
                (sys_flag,) = _INT.unpack_from(data, start + SYSFLAG_POS)
                pos = start + body_length_pos(sys_flag)
                (body_len,) = _INT.unpack_from(data, pos)
                if body_len < 0 or pos + 4 + body_len > start + size:
                    raise ReplyError(f"a body of {body_len} bytes outside its record")
                out.append(_plain(data[pos + 4:pos + 4 + body_len], sys_flag))
        except struct.error as exc:
            raise ReplyError(f"a record too short for its header: {exc}") from None
        return out


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
