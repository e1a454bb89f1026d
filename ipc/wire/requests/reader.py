"""The readers' ops but ack mode's (``mqstore.ipc.wire.requests.acks``): pull, queries, consumer
offsets and the groups' administration (``mqstore.actors.reader.actor`` has the replies).

    pull            group?, topic, queue, offset, max?, max_bytes?, by_bytes?, tags?, wait_ms?, raw?, trace?
    query_key       topic, key, max?, raw?, begin_ms?, end_ms?
    query_keys      topic, keys (1 to MAX_QUERY_KEYS), max?, begin_ms?, end_ms?
    query_uniq      topic, uniq_key, raw?
    view_id         msg_id, raw?
    offset_by_time  topic, queue, ts_ms, upper?
    queue_info      topic
    commit_offset   group, topic, queue, offset, admin?   (admin: a reset, not a consumer alive)
    fetch_offset    group, topic, queue
    group_describe  group
    delete_topic_offsets  topic
    watch_queues    topic, known (queue ids, at most MAX_WATCH_QUEUES), wait_ms
                    (reader 0: answered with queue_info's reply once the topic has a queue not known,
                    or when wait_ms runs out)
    groups, group_activity, ack_stats: no fields
    topic_stats     topic
    delete_group    group, live_ms   (refused while a consumer of the group was served within live_ms)
    ack_group_stats group
    pull_queues     group?, topic, queues [[queue, offset], ...] (1 to MAX_SPAN_QUEUES, each queue once),
                    max?, max_bytes?, tags?, wait_ms?, trace?
                    (a pull of several queues at once, as Kafka's fetch spans partitions: ``max`` and
                    ``max_bytes`` bound each queue's part, [broker] fetch_max_* the whole reply; the
                    records always come packed)

A field marked ? may be absent (None here): the reader's default. A pull's ``max`` is at most
MAX_PULL_COUNT, or MAX_FETCH_COUNT with ``by_bytes``; its ``wait_ms`` at most [broker]
long_poll_max_ms, which the reader checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests.base import (
    INT_MAX,
    LONG_MAX,
    MAX_FETCH_BYTES,
    MAX_FETCH_COUNT,
    MAX_NAME_CHARS,
    MAX_PULL_COUNT,
    Op,
    Request,
    Role,
    bounded_name,
    optional,
    topic,
)

MAX_QUERY_KEYS = 1024  # keys in one query_keys request
MAX_WATCH_QUEUES = 65_536  # queue ids a watch_queues request names
MAX_SPAN_QUEUES = 1024  # (queue, offset) pairs a pull_queues request names


def _queue_id(message: dict[str, Any]) -> int:
    value: int = schema.field(message, "queue", int, lo=0, hi=INT_MAX)
    return value


def _name(message: dict[str, Any], name: str) -> str:
    value = bounded_name(message, name)
    assert value is not None
    return value


@dataclass(frozen=True, slots=True)
class Pull(Request):
    OP: ClassVar[Op] = Op.PULL
    WIRE: ClassVar[tuple[str, ...]] = ("group", "topic", "queue", "offset", "max", "max_bytes", "by_bytes", "tags",
                                       "wait_ms", "raw", "trace")
    group: str | None
    topic: str
    queue_id: int
    queue_offset: int
    max_count: int | None = None      # None: 32
    max_bytes: int | None = None      # None: [store] max_transfer_bytes
    by_bytes: bool | None = None      # capped by [broker] fetch_max_* (an ipc consumer's pulls), not RocketMQ's
    tags: str | None = None           # None: "*"
    wait_ms: int | None = None        # None: answer at once
    raw: bool | None = None           # the records as stored, not maps
    trace: bool | None = None         # the reader's clock in the reply

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Pull:
        by_bytes = optional(message, "by_bytes", bool)
        return cls(bounded_name(message, "group", required=False), topic(message), _queue_id(message),
                   schema.field(message, "offset", int, lo=0, hi=LONG_MAX),
                   optional(message, "max", int, lo=1, hi=MAX_FETCH_COUNT if by_bytes else MAX_PULL_COUNT),
                   optional(message, "max_bytes", int, lo=1, hi=MAX_FETCH_BYTES), by_bytes,
                   bounded_name(message, "tags", required=False), optional(message, "wait_ms", int, lo=0, hi=LONG_MAX),
                   optional(message, "raw", bool), optional(message, "trace", bool))


def _time_range(message: dict[str, Any]) -> tuple[int | None, int | None]:
    return (optional(message, "begin_ms", int, lo=0, hi=LONG_MAX), optional(message, "end_ms", int, lo=0, hi=LONG_MAX))


@dataclass(frozen=True, slots=True)
class QueryKey(Request):
    OP: ClassVar[Op] = Op.QUERY_KEY
    WIRE: ClassVar[tuple[str, ...]] = ("topic", "key", "max", "raw", "begin_ms", "end_ms")
    topic: str
    key: str
    max_count: int | None = None      # None: [store] max_query_count, which also caps it
    raw: bool | None = None
    begin_ms: int | None = None
    end_ms: int | None = None

    @classmethod
    def decode(cls, message: dict[str, Any]) -> QueryKey:
        return cls(topic(message), _name(message, "key"), optional(message, "max", int, lo=1, hi=MAX_PULL_COUNT),
                   optional(message, "raw", bool), *_time_range(message))


@dataclass(frozen=True, slots=True)
class QueryKeys(Request):
    OP: ClassVar[Op] = Op.QUERY_KEYS
    WIRE: ClassVar[tuple[str, ...]] = ("topic", "keys", "max", "begin_ms", "end_ms")
    topic: str
    keys: tuple[str, ...]
    max_count: int | None = None
    begin_ms: int | None = None
    end_ms: int | None = None

    @classmethod
    def decode(cls, message: dict[str, Any]) -> QueryKeys:
        keys = schema.field(message, "keys", list)
        if not 1 <= len(keys) <= MAX_QUERY_KEYS:
            raise schema.SchemaError(f"keys must hold 1 to {MAX_QUERY_KEYS} keys, got {len(keys)}")
        if not all(isinstance(k, str) and len(k) <= MAX_NAME_CHARS for k in keys):
            raise schema.SchemaError(f"keys must be strings of at most {MAX_NAME_CHARS} characters")
        return cls(topic(message), tuple(keys), optional(message, "max", int, lo=1, hi=MAX_PULL_COUNT),
                   *_time_range(message))


@dataclass(frozen=True, slots=True)
class QueryUniq(Request):
    OP: ClassVar[Op] = Op.QUERY_UNIQ
    topic: str
    uniq_key: str
    raw: bool | None = None

    @classmethod
    def decode(cls, message: dict[str, Any]) -> QueryUniq:
        return cls(topic(message), _name(message, "uniq_key"), optional(message, "raw", bool))


@dataclass(frozen=True, slots=True)
class ViewId(Request):
    OP: ClassVar[Op] = Op.VIEW_ID
    msg_id: str
    raw: bool | None = None

    @classmethod
    def decode(cls, message: dict[str, Any]) -> ViewId:
        return cls(_name(message, "msg_id"), optional(message, "raw", bool))


@dataclass(frozen=True, slots=True)
class OffsetByTime(Request):
    OP: ClassVar[Op] = Op.OFFSET_BY_TIME
    WIRE: ClassVar[tuple[str, ...]] = ("topic", "queue", "ts_ms", "upper")
    topic: str
    queue_id: int
    ts_ms: int
    upper: bool | None = None  # the last offset at or before ts_ms, not the first at or after

    @classmethod
    def decode(cls, message: dict[str, Any]) -> OffsetByTime:
        return cls(topic(message), _queue_id(message), schema.field(message, "ts_ms", int, lo=0, hi=LONG_MAX),
                   optional(message, "upper", bool))


@dataclass(frozen=True, slots=True)
class QueueInfo(Request):
    OP: ClassVar[Op] = Op.QUEUE_INFO
    topic: str

    @classmethod
    def decode(cls, message: dict[str, Any]) -> QueueInfo:
        return cls(topic(message))


@dataclass(frozen=True, slots=True)
class CommitOffset(Request):
    OP: ClassVar[Op] = Op.COMMIT_OFFSET
    WIRE: ClassVar[tuple[str, ...]] = ("group", "topic", "queue", "offset", "admin")
    group: str
    topic: str
    queue_id: int
    queue_offset: int
    admin: bool | None = None

    @property
    def role(self) -> Role | None:
        return Role.ADMIN if self.admin else Role.CONSUME  # a reset is the administrator's

    @classmethod
    def decode(cls, message: dict[str, Any]) -> CommitOffset:
        return cls(_name(message, "group"), topic(message), _queue_id(message),
                   schema.field(message, "offset", int, lo=0, hi=LONG_MAX), optional(message, "admin", bool))


@dataclass(frozen=True, slots=True)
class FetchOffset(Request):
    OP: ClassVar[Op] = Op.FETCH_OFFSET
    WIRE: ClassVar[tuple[str, ...]] = ("group", "topic", "queue")
    group: str
    topic: str
    queue_id: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> FetchOffset:
        return cls(_name(message, "group"), topic(message), _queue_id(message))


@dataclass(frozen=True, slots=True)
class Groups(Request):
    OP: ClassVar[Op] = Op.GROUPS


@dataclass(frozen=True, slots=True)
class GroupDescribe(Request):
    OP: ClassVar[Op] = Op.GROUP_DESCRIBE
    group: str

    @classmethod
    def decode(cls, message: dict[str, Any]) -> GroupDescribe:
        return cls(_name(message, "group"))


@dataclass(frozen=True, slots=True)
class DeleteTopicOffsets(Request):
    OP: ClassVar[Op] = Op.DELETE_TOPIC_OFFSETS
    topic: str

    @classmethod
    def decode(cls, message: dict[str, Any]) -> DeleteTopicOffsets:
        return cls(topic(message))


@dataclass(frozen=True, slots=True)
class GroupActivity(Request):
    OP: ClassVar[Op] = Op.GROUP_ACTIVITY


@dataclass(frozen=True, slots=True)
class AckStats(Request):
    OP: ClassVar[Op] = Op.ACK_STATS


@dataclass(frozen=True, slots=True)
class WatchQueues(Request):
    OP: ClassVar[Op] = Op.WATCH_QUEUES
    topic: str
    known: tuple[int, ...]
    wait_ms: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> WatchQueues:
        known = schema.field(message, "known", list)
        if len(known) > MAX_WATCH_QUEUES or not all(type(q) is int and 0 <= q <= INT_MAX for q in known):
            raise schema.SchemaError(f"known must hold at most {MAX_WATCH_QUEUES} queue ids")
        return cls(topic(message), tuple(known), schema.field(message, "wait_ms", int, lo=0, hi=LONG_MAX))

@dataclass(frozen=True, slots=True)
class TopicStats(Request):
    OP: ClassVar[Op] = Op.TOPIC_STATS
    topic: str

    @classmethod
    def decode(cls, message: dict[str, Any]) -> TopicStats:
        return cls(topic(message))


@dataclass(frozen=True, slots=True)
class DeleteGroup(Request):
    OP: ClassVar[Op] = Op.DELETE_GROUP
    group: str
    live_ms: int  # a consumer of the group served within this makes it live: the deletion is refused

    @classmethod
    def decode(cls, message: dict[str, Any]) -> DeleteGroup:
        return cls(_name(message, "group"), schema.field(message, "live_ms", int, lo=0, hi=LONG_MAX))


@dataclass(frozen=True, slots=True)
class AckGroupStats(Request):
    OP: ClassVar[Op] = Op.ACK_GROUP_STATS
    group: str

    @classmethod
    def decode(cls, message: dict[str, Any]) -> AckGroupStats:
        return cls(_name(message, "group"))


@dataclass(frozen=True, slots=True)
class PullQueues(Request):
    OP: ClassVar[Op] = Op.PULL_QUEUES
    WIRE: ClassVar[tuple[str, ...]] = ("group", "topic", "queues", "max", "max_bytes", "tags", "wait_ms", "trace")
    group: str | None
    topic: str
    queues: tuple[tuple[int, int], ...]  # (queue id, queue offset), in the order the reader reads them
    max_count: int | None = None      # each queue's part; None: [broker] fetch_max_count
    max_bytes: int | None = None      # each queue's part; None: [broker] fetch_max_bytes
    tags: str | None = None           # None: "*"
    wait_ms: int | None = None        # None: answer at once
    trace: bool | None = None         # the reader's clock in the reply

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PullQueues:
        pairs = schema.field(message, "queues", list)
        if not 1 <= len(pairs) <= MAX_SPAN_QUEUES:
            raise schema.SchemaError(f"queues must name 1 to {MAX_SPAN_QUEUES} (queue, offset) pairs, got {len(pairs)}")
        if not all(type(p) is list and len(p) == 2 and type(p[0]) is int and type(p[1]) is int
                   and 0 <= p[0] <= INT_MAX and 0 <= p[1] <= LONG_MAX for p in pairs):
            raise schema.SchemaError("queues must hold [queue id, queue offset] pairs of non-negative integers")
        if len({p[0] for p in pairs}) != len(pairs):
            raise schema.SchemaError("queues must name each queue once")
        return cls(bounded_name(message, "group", required=False), topic(message),
                   tuple((p[0], p[1]) for p in pairs), optional(message, "max", int, lo=1, hi=MAX_FETCH_COUNT),
                   optional(message, "max_bytes", int, lo=1, hi=MAX_FETCH_BYTES),
                   bounded_name(message, "tags", required=False), optional(message, "wait_ms", int, lo=0, hi=LONG_MAX),
                   optional(message, "trace", bool))
