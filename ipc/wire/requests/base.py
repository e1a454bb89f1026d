"""What every request has: its op (one ``Op`` for every op an actor serves), its map, and the field
rules the decoders share.

A request is one frozen class per op (``mqstore.ipc.wire.requests``): ``encode(request_id)`` gives
the map a client sends (``v``, ``op``, ``id``, then its fields in the class's order, a field that
is None left out: the reader's default), ``decode(message)`` the class back from a map that
``schema.unpack`` read, raising ``schema.SchemaError`` that names the field. The limits checked
here are the wire's own; those that depend on the broker's configuration (the most queues, messages
in a send, the longest poll) are checked where the configuration is known, with ``at_most``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, ClassVar, Self

from mqstore.engine.names import check_topic
from mqstore.ipc.wire import schema

INT_MAX = (1 << 31) - 1            # queue ids, flags
LONG_MAX = (1 << 63) - 1           # offsets, times
MAX_NAME_CHARS = 1024              # keys, ids, groups, subscription expressions
MAX_PULL_COUNT = 1024              # messages one pull (or query) asks for
MAX_FETCH_COUNT = 65_536           # ... and one pull sized by bytes (``by_bytes``)
MAX_FETCH_BYTES = 64 * 1024 * 1024  # the most bytes a reader answers one pull with


class Op(StrEnum):
    """Every op an actor serves on its ROUTER (writer ingress, readers, transactions) or REP (the
    supervisor's control socket); the values are the strings on the wire."""

    PING = "ping"                              # every actor
    # the writer's ingress
    SEND = "send"
    SEND_ENCODED = "send_encoded"
    ENCODING = "encoding"
    TOPICS = "topics"
    CREATE_TOPIC = "create_topic"
    DELETE_TOPIC = "delete_topic"
    # the readers
    PULL = "pull"
    QUERY_KEY = "query_key"
    QUERY_KEYS = "query_keys"
    QUERY_UNIQ = "query_uniq"
    VIEW_ID = "view_id"
    OFFSET_BY_TIME = "offset_by_time"
    QUEUE_INFO = "queue_info"
    COMMIT_OFFSET = "commit_offset"
    FETCH_OFFSET = "fetch_offset"
    GROUPS = "groups"
    GROUP_DESCRIBE = "group_describe"
    DELETE_TOPIC_OFFSETS = "delete_topic_offsets"
    GROUP_ACTIVITY = "group_activity"
    ACK_STATS = "ack_stats"
    ACK_PULL = "ack_pull"
    ACK = "ack"
    NACK = "nack"
    ACK_RELEASE = "ack_release"
    OFFSET_TABLE = "offset_table"
    MERGE_OFFSETS = "merge_offsets"
    ACK_MARKS = "ack_marks"
    MERGE_ACK_MARKS = "merge_ack_marks"
    PURGE_QUEUES = "purge_queues"
    PERSIST_OFFSETS = "persist_offsets"
    WATCH_QUEUES = "watch_queues"
    # the transactions actor
    END_TRANSACTION = "end_transaction"
    REGISTER_PRODUCER = "register_producer"
    RESUME_CHECK = "resume_check"
    # the supervisor's control socket
    STATUS = "status"
    STOP = "stop"
    PROMOTE = "promote"
    # the readers: a topic's queue sizes, deleting a group, an ack-mode group's queues
    TOPIC_STATS = "topic_stats"
    DELETE_GROUP = "delete_group"
    ACK_GROUP_STATS = "ack_group_stats"
    # the readers: one pull spanning several queues of a topic
    PULL_QUEUES = "pull_queues"
    # the readers: one ack pull spanning several queues of a group and topic
    ACK_PULL_QUEUES = "ack_pull_queues"


class Role(StrEnum):
    """What a CURVE client key may do (``mqstore.ipc.transport.roles``): the words of ``roles.toml``."""

    PRODUCE = "produce"
    CONSUME = "consume"
    ADMIN = "admin"


# The role each op needs from a CURVE client key that has roles; None: any key let in. One exception
# rides on a field, not the op: a ``commit_offset`` with ``admin`` set is a reset and needs ADMIN
# (``CommitOffset.role``). A plain commit may move the group's offset anywhere in the queue, as a RocketMQ
# consumer's UPDATE_CONSUMER_OFFSET may.
OP_ROLES: dict[Op, Role | None] = {
    Op.PING: None, Op.ENCODING: None, Op.TOPICS: None,
    Op.SEND: Role.PRODUCE, Op.SEND_ENCODED: Role.PRODUCE,
    Op.END_TRANSACTION: Role.PRODUCE, Op.REGISTER_PRODUCER: Role.PRODUCE, Op.RESUME_CHECK: Role.PRODUCE,
    Op.PULL: Role.CONSUME, Op.QUERY_KEY: Role.CONSUME, Op.QUERY_KEYS: Role.CONSUME, Op.QUERY_UNIQ: Role.CONSUME,
    Op.VIEW_ID: Role.CONSUME, Op.OFFSET_BY_TIME: Role.CONSUME, Op.QUEUE_INFO: Role.CONSUME,
    Op.COMMIT_OFFSET: Role.CONSUME, Op.FETCH_OFFSET: Role.CONSUME, Op.GROUPS: Role.CONSUME,
    Op.GROUP_DESCRIBE: Role.CONSUME, Op.GROUP_ACTIVITY: Role.CONSUME, Op.ACK_STATS: Role.CONSUME,
    Op.ACK_PULL: Role.CONSUME, Op.ACK: Role.CONSUME, Op.NACK: Role.CONSUME, Op.ACK_RELEASE: Role.CONSUME,
    Op.CREATE_TOPIC: Role.ADMIN, Op.DELETE_TOPIC: Role.ADMIN, Op.DELETE_TOPIC_OFFSETS: Role.ADMIN,
    Op.STATUS: Role.ADMIN, Op.STOP: Role.ADMIN, Op.PROMOTE: Role.ADMIN,
    Op.OFFSET_TABLE: Role.ADMIN, Op.MERGE_OFFSETS: Role.ADMIN, Op.ACK_MARKS: Role.ADMIN,
    Op.MERGE_ACK_MARKS: Role.ADMIN,
    Op.PURGE_QUEUES: Role.ADMIN, Op.PERSIST_OFFSETS: Role.CONSUME,
    Op.WATCH_QUEUES: Role.CONSUME,
    Op.TOPIC_STATS: Role.CONSUME, Op.DELETE_GROUP: Role.ADMIN, Op.ACK_GROUP_STATS: Role.CONSUME,
    Op.PULL_QUEUES: Role.CONSUME, Op.ACK_PULL_QUEUES: Role.CONSUME,
}
assert set(OP_ROLES) == set(Op), "every op says the role it needs"


class UnknownOpError(schema.SchemaError):
    """A request whose op this actor does not serve: answered UNKNOWN_OP, not BAD_REQUEST."""

    def __init__(self, op: str, actor: str) -> None:
        super().__init__(f"the {actor} does not serve {op!r}")
        self.op = op


class Request:
    """One op's request. A subclass is a frozen dataclass whose fields are, in order, the map's
    fields after ``v``, ``op`` and ``id``; ``WIRE`` names them on the wire where the attribute says
    more (``queue_id`` is ``queue``; without ``WIRE`` the names are the attributes')."""

    __slots__ = ()
    OP: ClassVar[Op]
    WIRE: ClassVar[tuple[str, ...]] = ()

    def encode(self, request_id: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"v": schema.VERSION, "op": self.OP.value, "id": request_id}
        names: tuple[str, ...] = self.__slots__
        for key, name in zip(self.WIRE or names, names, strict=True):
            value = getattr(self, name)
            if value is not None:
                message[key] = value
        return message

    @property
    def role(self) -> Role | None:
        """The role a CURVE client key needs to make this request (``OP_ROLES``)."""
        return OP_ROLES[self.OP]

    @property
    def parts(self) -> Sequence[bytes | memoryview]:
        """The frames after the map (``send_encoded``'s records alone has any)."""
        return ()

    def frames(self, request_id: Any) -> list[bytes | memoryview]:
        return schema.pack_message(self.encode(request_id), self.parts)

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Self:
        """The request of an unpacked map; ``schema.SchemaError`` naming the field otherwise. A request
        of no fields ignores whatever else its map holds, as the actors always have."""
        del message
        return cls()


def optional(message: dict[str, Any], name: str, kind: type, lo: int | None = None, hi: int | None = None) -> Any:
    """A field that may be absent (None)."""
    return schema.field(message, name, kind, default=None, lo=lo, hi=hi)


def topic(message: dict[str, Any], name: str = "topic") -> str:
    """A topic, which also names a directory: RocketMQ's rule keeps it inside consumequeue/."""
    value: str = schema.field(message, name, str)
    reason = check_topic(value)
    if reason is not None:
        raise schema.SchemaError(reason if name == "topic" else f"{name}: {reason}")
    return value


def bounded_name(message: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    """A key, id, group or subscription expression: a string of at most MAX_NAME_CHARS."""
    value: str | None = schema.field(message, name, str, default=... if required else None)
    if value is not None and len(value) > MAX_NAME_CHARS:
        raise schema.SchemaError(f"field {name!r} is longer than {MAX_NAME_CHARS} characters")
    return value


def strings(message: dict[str, Any], name: str, *, default: Any = ...) -> tuple[str, ...] | None:
    values = schema.field(message, name, list, default=default)
    if values is None:
        return None
    if not all(type(v) is str for v in values):
        raise schema.SchemaError(f"field {name!r} must hold strings")
    return tuple(values)


def at_most(name: str, value: int | None, hi: int) -> None:
    """A bound the broker's configuration sets, checked by the actor that knows it."""
    if value is not None and value > hi:
        raise schema.SchemaError(f"field {name!r} = {value} is above {hi}")
