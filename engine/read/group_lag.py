"""A consumer group's progress on each queue, the one computation of consumer lag that the readers,
the offline commands and the metrics all use (RocketMQ's ``consumerProgress``, Kafka's
``kafka-consumer-groups.sh --describe``).

Per queue: the committed offset (the next one the group consumes; -1 when it never committed), the
queue's min and max offset (max: one past its last entry), the lag (max offset minus committed
offset, counting from the min offset when the group never committed or retention took what it had
not consumed), and the last consume time: the store time of the last message it consumed (the one
just below its committed offset), 0 when there is none, as RocketMQ's ``lastTimestamp``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mqstore.engine.meta.offsets import TOPIC_GROUP_SEPARATOR

NEVER = -1


@dataclass(frozen=True, slots=True)
class QueueLag:
    topic: str
    queue_id: int
    committed_offset: int   # the next queue offset the group consumes; NEVER when it never committed
    min_queue_offset: int
    max_queue_offset: int
    lag: int
    last_consume_ms: int    # store time of the last message consumed; 0 when none


def queue_lag(topic: str, queue_id: int, committed_offset: int, min_queue_offset: int, max_queue_offset: int,
              store_ms_at: Callable[[int], int]) -> QueueLag:
    """``store_ms_at(queue_offset)``: the store time of that entry's message, -1 when it is not there."""
    consumed_to = max(committed_offset, min_queue_offset)
    last_ms = 0
    if min_queue_offset < committed_offset <= max_queue_offset:
        last_ms = max(store_ms_at(committed_offset - 1), 0)
    return QueueLag(topic, queue_id, committed_offset, min_queue_offset, max_queue_offset,
                    max(max_queue_offset - consumed_to, 0), last_ms)


def groups_in(table: Mapping[str, Mapping[int, int]]) -> dict[str, list[str]]:
    """Group -> the topics it committed offsets on, from a ``"topic@group"`` offset table, sorted."""
    groups: dict[str, set[str]] = {}
    for key in table:
        topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
        groups.setdefault(group, set()).add(topic)
    return {group: sorted(topics) for group, topics in sorted(groups.items())}


def group_lags(group: str, topics: Iterable[str], table: Mapping[str, Mapping[int, int]],
               spans: Callable[[str], Mapping[int, tuple[int, int]]],
               store_ms_at: Callable[[str, int, int], int]) -> list[QueueLag]:
    """Every queue of ``topics``, the topics ``group`` committed on (``ConsumerOffsets.topics_of``):
    only their keys of ``table`` are read, so one group's cost does not grow with the others.
    ``spans(topic)`` gives each queue's (min, max) offsets, ``store_ms_at(topic, queue_id,
    queue_offset)`` a message's store time."""
    lags: list[QueueLag] = []
    for topic in topics:
        committed = table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})
        queue_spans = dict(spans(topic))
        for queue_id in sorted(set(queue_spans) | set(committed)):
            lo, hi = queue_spans.get(queue_id, (0, 0))
            lags.append(queue_lag(topic, queue_id, committed.get(queue_id, NEVER), lo, hi,
                                  functools.partial(store_ms_at, topic, queue_id)))
    return lags
