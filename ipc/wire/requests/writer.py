"""The writer's ingress ops: ``send`` (message maps), ``send_encoded`` (records the producer encoded,
``mqstore.ipc.wire.encoded``), ``encoding``, ``topics``, ``create_topic`` and ``delete_topic``.

    send           msgs: [message map, ...]  (1 to [broker] max_batch_messages)
                   -> results: [SendResult map, ...]
    send_encoded   columns, topics, tags, keys, key_bounds; the records as the one frame after the map
                   -> results (packed rows), status, reason, written_status
    encoding       -> store_host, prop_crc, max_body_bytes
    topics         -> topics {name: queue count}
    create_topic   topic, queues? (1 to [broker] max_queues) -> topic, queues
    delete_topic   topic                                      -> topic, existed, phys_offset

A message map of a ``send`` is ``SendMessage``: its fields in the order a producer writes them
(``Outgoing.to_wire``), None left out. A send carries up to thousands of them: each is read once,
field by field, into a tuple, with no object per field.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from mqstore.engine.batch.key_text import KeyText
from mqstore.engine.batch.record_batch import EncodedBatch
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests.base import INT_MAX, LONG_MAX, Op, Request, optional, strings

if TYPE_CHECKING:
    from mqstore.ipc.wire.messages import Outgoing

_INT_MIN = -(1 << 31)


class SendMessage(NamedTuple):
    """One message of a ``send``: the wire's fields, in the producer's order, None where absent (the
    writer's default: no tags, no keys, round robin, born now, ...)."""

    topic: str
    body: bytes
    keys: tuple[str, ...] | None = None
    props: dict[str, str] | None = None
    flag: int | None = None
    reconsume_times: int | None = None
    tags: str | None = None
    queue: int | None = None
    shard: str | None = None
    born_ms: int | None = None
    sys_flag: int | None = None
    prepared_tx_offset: int | None = None
    born_host: tuple[str, int] | None = None

    def wire(self) -> dict[str, Any]:
        return {k: v for k, v in zip(_MESSAGE_FIELDS, self, strict=True) if v is not None}

    @classmethod
    def of(cls, message: Outgoing) -> SendMessage:
        """A producer's message as it goes out: the same map as ``Outgoing.to_wire``."""
        body = message.body.encode() if isinstance(message.body, str) else bytes(message.body)
        if isinstance(message.keys, str):
            raise TypeError("keys must be a sequence of strings, not one string")
        host = message.born_host
        return cls(message.topic, body, tuple(message.keys), dict(message.properties), message.flag,
                   message.reconsume_times, message.tags, message.queue_id, message.shard, message.born_ms,
                   message.sys_flag or None, message.prepared_tx_offset or None,
                   (host[0], host[1]) if host is not None else None)

    @classmethod
    def decode(cls, raw: Any) -> SendMessage:
        """One message map: each field it holds looked at once, in one pass (a send carries thousands:
        no call per field); one of the wrong type or out of bounds is ``schema.field``'s SchemaError."""
        if type(raw) is not dict:
            raise schema.SchemaError("each message must be a map")
        fields: dict[str, Any] = raw
        for name, value in fields.items():
            kind = _KINDS.get(name)
            if kind is None or value is None:
                continue  # a field no message has, or one left to its default
            bounds = _BOUNDS.get(name)
            if type(value) is not kind or (bounds is not None and not bounds[0] <= fields[name] <= bounds[1]):
                lo, hi = bounds or (None, None)
                schema.field(fields, name, kind, lo=lo, hi=hi)  # raises, naming the field
        get = fields.get
        topic, body, keys, props, born_host = get("topic"), get("body"), get("keys"), get("props"), get("born_host")
        if topic is None:
            raise schema.SchemaError("missing field 'topic'")
        if body is None:
            raise schema.SchemaError("missing field 'body'")
        if keys is not None:
            if not all(type(k) is str for k in keys):
                raise schema.SchemaError("keys must be strings")
            keys = tuple(keys)
        if props is not None and not all(type(k) is str and type(v) is str for k, v in props.items()):
            raise schema.SchemaError("properties must map strings to strings")
        return cls(topic, body, keys, props, get("flag"), get("reconsume_times"), get("tags"), get("queue"),
                   get("shard"), get("born_ms"), get("sys_flag"), get("prepared_tx_offset"),
                   None if born_host is None else _host(born_host))


_MESSAGE_FIELDS = SendMessage._fields
_KINDS: dict[str, type] = {"topic": str, "body": bytes, "keys": list, "props": dict, "flag": int,
                           "reconsume_times": int, "tags": str, "queue": int, "shard": str, "born_ms": int,
                           "sys_flag": int, "prepared_tx_offset": int, "born_host": list}
_BOUNDS: dict[str, tuple[int, int]] = {"flag": (_INT_MIN, INT_MAX), "reconsume_times": (0, INT_MAX),
                                       "born_ms": (0, LONG_MAX), "sys_flag": (0, INT_MAX),
                                       "prepared_tx_offset": (0, LONG_MAX)}


def _host(born_host: list[Any]) -> tuple[str, int]:
    if not (len(born_host) == 2 and isinstance(born_host[0], str) and type(born_host[1]) is int
            and 0 <= born_host[1] < 65536):
        raise schema.SchemaError("born_host must be [ip, port]")
    try:
        ipaddress.ip_address(born_host[0])
    except ValueError:
        raise schema.SchemaError(f"born_host address {born_host[0]!r} is not an IP address") from None
    return born_host[0], born_host[1]


@dataclass(frozen=True, slots=True)
class Send(Request):
    OP: ClassVar[Op] = Op.SEND
    msgs: tuple[SendMessage, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "op": self.OP.value, "id": request_id, "msgs": [m.wire() for m in self.msgs]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Send:
        raw_msgs = schema.field(message, "msgs", list)
        if not raw_msgs:
            raise schema.SchemaError("field 'msgs' holds no message: a send carries at least one")
        return cls(tuple(map(SendMessage.decode, raw_msgs)))


@dataclass(frozen=True, slots=True)
class SendEncoded(Request):
    """Records the producer encoded (``mqstore.engine.batch.record_batch``): one frame after the map,
    a view of ZeroMQ's receive buffer once decoded; the map has their columns, topics and tags tables
    and their key text (``mqstore.engine.batch.key_text``), checked with the round's batch."""

    OP: ClassVar[Op] = Op.SEND_ENCODED
    records: bytes | memoryview
    columns: bytes
    topics: tuple[str, ...]
    tags: tuple[str, ...]
    keys: bytes
    key_bounds: bytes

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "op": self.OP.value, "id": request_id, "columns": self.columns,
                "topics": self.topics, "tags": self.tags, "keys": self.keys, "key_bounds": self.key_bounds}

    @property
    def parts(self) -> Sequence[bytes | memoryview]:
        return (self.records,)

    @classmethod
    def of(cls, batch: EncodedBatch) -> SendEncoded:
        """A batch's request (``mqstore.ipc.wire.encoded.BatchEncoder``); its one part is ``batch.records``."""
        text, bounds = KeyText.of(batch.uniq_keys, batch.keys).wire()  # one compiled call, no string per record
        return cls(batch.records, batch.columns, tuple(batch.topics), tuple(batch.tags), text, bounds)

    @classmethod
    def decode(cls, message: dict[str, Any]) -> SendEncoded:
        parts = message.get("parts", ())
        if len(parts) != 1:
            raise schema.SchemaError(f"send_encoded carries its records as the one frame after its map, got "
                                     f"{len(parts)} frame(s)")
        get = message.get
        columns, topics, tags, keys, key_bounds = (get("columns"), get("topics"), get("tags"), get("keys"),
                                                   get("key_bounds"))
        # the hot path: each field looked at once, no call per field
        if not (type(columns) is bytes and type(keys) is bytes and type(key_bounds) is bytes
                and type(topics) is list and type(tags) is list
                and all(map(isinstance, topics, repeat(str))) and all(map(isinstance, tags, repeat(str)))):
            return cls._refused(message)
        return cls(parts[0], columns, tuple(topics), tuple(tags), keys, key_bounds)

    @classmethod
    def _refused(cls, message: dict[str, Any]) -> SendEncoded:
        """The slow path of a map the hot path refused: the SchemaError that names its field."""
        for name in ("columns", "keys", "key_bounds"):
            schema.field(message, name, bytes)
        strings(message, "topics")
        strings(message, "tags")
        raise AssertionError("a send_encoded map the hot path refused passed every check")


@dataclass(frozen=True, slots=True)
class Encoding(Request):
    OP: ClassVar[Op] = Op.ENCODING


@dataclass(frozen=True, slots=True)
class Topics(Request):
    OP: ClassVar[Op] = Op.TOPICS


@dataclass(frozen=True, slots=True)
class CreateTopic(Request):
    """A topic made, or given more queues; the writer's topic table checks the name."""

    OP: ClassVar[Op] = Op.CREATE_TOPIC
    topic: str
    queues: int | None = None  # None: [broker] default_queues

    @classmethod
    def decode(cls, message: dict[str, Any]) -> CreateTopic:
        return cls(schema.field(message, "topic", str), optional(message, "queues", int, lo=1, hi=INT_MAX))


@dataclass(frozen=True, slots=True)
class DeleteTopic(Request):
    """The writer refuses a name outside RocketMQ's topic rule as MESSAGE_ILLEGAL, not BAD_REQUEST."""

    OP: ClassVar[Op] = Op.DELETE_TOPIC
    topic: str

    @classmethod
    def decode(cls, message: dict[str, Any]) -> DeleteTopic:
        return cls(schema.field(message, "topic", str))
