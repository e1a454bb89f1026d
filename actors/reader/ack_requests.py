"""Ack-mode requests as a reader reads them (``mqstore.ipc.wire.receipts`` has the wire): every field checked,
a bad one a ``SchemaError`` (the reader's error boundary turns it into BAD_REQUEST), except inside
a receipt list, where one bad receipt is one BAD_REQUEST result and the others are served."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.actors.config import BrokerSection
from mqstore.actors.reader.fields import INT_MAX, LONG_MAX, MAX_PULL_COUNT, topic
from mqstore.engine.names import check_topic
from mqstore.engine.read.lookup import TagFilter
from mqstore.ipc.wire import receipts, schema

AckKey = tuple[str, str, int]  # group, topic, queue id
MAX_RELEASE_QUEUES = 1024   # broker.max_queues' default: a topic's queues in one request
MAX_CONSUMER_CHARS = 256
MAX_VISIBILITY_MS = 12 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class AckPull:
    group: str
    topic: str
    queue_id: int
    consumer: str
    max_count: int
    prefetch: int
    visibility_ms: int
    tag_filter: TagFilter

    @property
    def key(self) -> AckKey:
        return (self.group, self.topic, self.queue_id)


@dataclass(frozen=True, slots=True)
class AckRelease:
    """A consumer leaving: its deliveries of these queues back; only those ``read`` (queue, seq) by
    its application count as a delivery."""

    group: str
    topic: str
    queue_ids: tuple[int, ...]
    consumer: str
    read: frozenset[tuple[int, int]]


def parse_ack_pull(message: dict[str, Any], cfg: BrokerSection) -> tuple[AckPull, int]:
    """The pull and its ``wait_ms``."""
    pull = AckPull(group(message), topic(message), schema.field(message, "queue", int, lo=0, hi=INT_MAX),
                   consumer(message),
                   schema.field(message, "max", int, default=32, lo=1, hi=MAX_PULL_COUNT),
                   schema.field(message, "prefetch", int, default=cfg.ack_prefetch, lo=1, hi=cfg.ack_prefetch),
                   schema.field(message, "visibility_ms", int, default=cfg.ack_visibility_timeout_ms, lo=1,
                                hi=MAX_VISIBILITY_MS),
                   TagFilter.parse(schema.field(message, "tags", str, default="*")))
    return pull, schema.field(message, "wait_ms", int, default=0, lo=0, hi=cfg.long_poll_max_ms)


def parse_ack_release(message: dict[str, Any]) -> AckRelease:
    queue_ids = schema.field(message, "queues", list)
    read = schema.field(message, "read", list, default=[])
    if len(queue_ids) > MAX_RELEASE_QUEUES or not all(type(q) is int and 0 <= q <= INT_MAX for q in queue_ids):
        raise schema.SchemaError(f"queues must be at most {MAX_RELEASE_QUEUES} queue ids")
    if len(read) > receipts.MAX_RECEIPTS or not all(
            isinstance(r, list) and len(r) == 2 and all(type(x) is int and 0 <= x <= LONG_MAX for x in r)
            for r in read):
        raise schema.SchemaError(f"read must be at most {receipts.MAX_RECEIPTS} [queue, seq] pairs")
    return AckRelease(group(message), topic(message), tuple(queue_ids), consumer(message),
                      frozenset((q, seq) for q, seq in read))


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


def group_reason(name: str) -> str | None:
    # the group names a directory and, with the prefix, the DLQ topic: both rules at once
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
