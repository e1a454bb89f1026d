"""Ack mode's ops, served by the reader that owns each (group, topic, queue)
(``mqstore.ipc.wire.receipts`` has the vocabulary and the replies).

    ack_pull     group, topic, queue, consumer, wait_ms?, tags?, max?, prefetch?, visibility_ms?
    ack          receipts: [[group, topic, queue, seq], ...]
    nack         receipts, requeue?
    ack_release  group, topic, queues, consumer, read: [[queue, seq], ...]
    ack_pull_queues  group, topic, queues [queue, ...] (1 to MAX_SPAN_QUEUES, each once), consumer, and
                 an ack_pull's wait_ms?, tags?, max?, prefetch?, visibility_ms? (``max`` and ``prefetch``
                 per queue): several queues' ack pulls in one, answered as an ack_pull is

A group names a directory and, with ``%DLQ%``, its dead-letter topic: both follow RocketMQ's topic
rule. A receipt list is checked as a list only: one bad receipt is one BAD_REQUEST result and the
others are served (``Receipt.parse``). ``prefetch`` is at most [broker] ack_prefetch and ``wait_ms``
at most long_poll_max_ms, which the reader checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mqstore.engine.names import check_topic
from mqstore.ipc.wire import receipts, schema
from mqstore.ipc.wire.requests.base import INT_MAX, LONG_MAX, MAX_PULL_COUNT, Op, Request, optional, topic

MAX_RELEASE_QUEUES = 1024   # broker.max_queues' default: a topic's queues in one request
MAX_CONSUMER_CHARS = 256
MAX_VISIBILITY_MS = 12 * 3600 * 1000
MAX_SPAN_QUEUES = 1024      # queue ids an ack_pull_queues request names

AckKey = tuple[str, str, int]  # group, topic, queue id


def group_reason(name: str) -> str | None:
    """Why a group name is refused: it names a directory and, with the prefix, the DLQ topic."""
    return check_topic(name) or check_topic(receipts.dlq_topic(name))


def group(message: dict[str, Any]) -> str:
    name: str = schema.field(message, "group", str)
    reason = group_reason(name)
    if reason is not None:
        raise schema.SchemaError(f"group: {reason}")
    return name


def consumer(message: dict[str, Any]) -> str:
    name: str = schema.field(message, "consumer", str)
    if not 0 < len(name) <= MAX_CONSUMER_CHARS:
        raise schema.SchemaError(f"consumer must be 1 to {MAX_CONSUMER_CHARS} characters")
    return name


def parse_receipt(raw: Any) -> tuple[AckKey, int] | None:
    """[group, topic, queue, seq] with every part valid, else None."""
    if not (isinstance(raw, list) and len(raw) == 4 and isinstance(raw[0], str) and isinstance(raw[1], str)
            and type(raw[2]) is int and type(raw[3]) is int):
        return None
    group_name, topic_name, queue_id, seq = raw
    if (group_reason(group_name) or check_topic(topic_name) or not 0 <= queue_id <= INT_MAX
            or not 0 <= seq <= LONG_MAX):
        return None
    return (group_name, topic_name, queue_id), seq


@dataclass(frozen=True, slots=True)
class AckPull(Request):
    OP: ClassVar[Op] = Op.ACK_PULL
    WIRE: ClassVar[tuple[str, ...]] = ("group", "topic", "queue", "consumer", "wait_ms", "tags", "max", "prefetch",
                                       "visibility_ms")
    group: str
    topic: str
    queue_id: int
    consumer: str
    wait_ms: int | None = None
    tags: str | None = None            # None: "*"
    max_count: int | None = None       # None: 32
    prefetch: int | None = None        # None: [broker] ack_prefetch, also its most
    visibility_ms: int | None = None   # None: [broker] ack_visibility_timeout_ms

    @property
    def key(self) -> AckKey:
        return (self.group, self.topic, self.queue_id)

    @classmethod
    def decode(cls, message: dict[str, Any]) -> AckPull:
        return cls(group(message), topic(message), schema.field(message, "queue", int, lo=0, hi=INT_MAX),
                   consumer(message), optional(message, "wait_ms", int, lo=0, hi=LONG_MAX),
                   optional(message, "tags", str), optional(message, "max", int, lo=1, hi=MAX_PULL_COUNT),
                   optional(message, "prefetch", int, lo=1, hi=INT_MAX),
                   optional(message, "visibility_ms", int, lo=1, hi=MAX_VISIBILITY_MS))


def _receipts(message: dict[str, Any]) -> tuple[Any, ...]:
    raw = schema.field(message, "receipts", list)
    if len(raw) > receipts.MAX_RECEIPTS:
        raise schema.SchemaError(f"at most {receipts.MAX_RECEIPTS} receipts per request")
    return tuple(raw)


@dataclass(frozen=True, slots=True)
class Ack(Request):
    """Receipts as they came: ``parse_receipt`` reads each, a bad one is that receipt's BAD_REQUEST."""

    OP: ClassVar[Op] = Op.ACK
    receipts: tuple[Any, ...]

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Ack:
        return cls(_receipts(message))


@dataclass(frozen=True, slots=True)
class Nack(Request):
    OP: ClassVar[Op] = Op.NACK
    receipts: tuple[Any, ...]
    requeue: bool | None = None  # None: requeue (False: dead-letter at once)

    @classmethod
    def decode(cls, message: dict[str, Any]) -> Nack:
        return cls(_receipts(message), optional(message, "requeue", bool))


@dataclass(frozen=True, slots=True)
class AckRelease(Request):
    """A consumer leaving: its deliveries of these queues back; only those ``read`` (queue, seq) by
    its application count as a delivery."""

    OP: ClassVar[Op] = Op.ACK_RELEASE
    WIRE: ClassVar[tuple[str, ...]] = ("group", "topic", "consumer", "queues", "read")
    group: str
    topic: str
    consumer: str
    queue_ids: tuple[int, ...]
    read: tuple[tuple[int, int], ...] | None = None

    @classmethod
    def decode(cls, message: dict[str, Any]) -> AckRelease:
        queue_ids = schema.field(message, "queues", list)
        read = schema.field(message, "read", list, default=None)
        if len(queue_ids) > MAX_RELEASE_QUEUES or not all(type(q) is int and 0 <= q <= INT_MAX for q in queue_ids):
            raise schema.SchemaError(f"queues must be at most {MAX_RELEASE_QUEUES} queue ids")
        if read is not None and (len(read) > receipts.MAX_RECEIPTS or not all(
                isinstance(r, list) and len(r) == 2 and all(type(x) is int and 0 <= x <= LONG_MAX for x in r)
                for r in read)):
            raise schema.SchemaError(f"read must be at most {receipts.MAX_RECEIPTS} [queue, seq] pairs")
        return cls(group(message), topic(message), consumer(message), tuple(queue_ids),
                   None if read is None else tuple((q, seq) for q, seq in read))


@dataclass(frozen=True, slots=True)
class AckPullQueues(Request):
    """Ack pulls of several queues of one group and topic at once (as Kafka's fetch spans partitions)."""

    OP: ClassVar[Op] = Op.ACK_PULL_QUEUES
    WIRE: ClassVar[tuple[str, ...]] = ("group", "topic", "queues", "consumer", "wait_ms", "tags", "max", "prefetch",
                                       "visibility_ms")
    group: str
    topic: str
    queue_ids: tuple[int, ...]         # in the order the reader reads them
    consumer: str
    wait_ms: int | None = None
    tags: str | None = None            # None: "*"
    max_count: int | None = None       # each queue's part; None: 32
    prefetch: int | None = None        # per queue; None: [broker] ack_prefetch, also its most
    visibility_ms: int | None = None   # None: [broker] ack_visibility_timeout_ms

    @classmethod
    def decode(cls, message: dict[str, Any]) -> AckPullQueues:
        queue_ids = schema.field(message, "queues", list)
        if not 1 <= len(queue_ids) <= MAX_SPAN_QUEUES:
            raise schema.SchemaError(f"queues must name 1 to {MAX_SPAN_QUEUES} queue ids, got {len(queue_ids)}")
        if not all(type(q) is int and 0 <= q <= INT_MAX for q in queue_ids):
            raise schema.SchemaError("queues must hold queue ids (non-negative integers)")
        if len(set(queue_ids)) != len(queue_ids):
            raise schema.SchemaError("queues must name each queue once")
        return cls(group(message), topic(message), tuple(queue_ids), consumer(message),
                   optional(message, "wait_ms", int, lo=0, hi=LONG_MAX), optional(message, "tags", str),
                   optional(message, "max", int, lo=1, hi=MAX_PULL_COUNT),
                   optional(message, "prefetch", int, lo=1, hi=INT_MAX),
                   optional(message, "visibility_ms", int, lo=1, hi=MAX_VISIBILITY_MS))
