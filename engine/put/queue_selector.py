"""Which queue of a topic a message goes to when the producer names none: by sharding key, or round robin.

Both of the writer's send paths ask here, the messages sent as maps one at a time (``shard_queue``,
``RoundRobin.turn``) and the producer-encoded batches all at once (``shard_queues``,
``RoundRobin.turns``); the producer's encoder asks ``shard_hash`` for what it puts in a record's
``shard`` column (``mqstore.engine.batch.record_batch``), so the queue count is the writer's alone.

The shard rule is RocketMQ's ``SelectMessageQueueByHash``: the key's Java ``hashCode`` (a signed
32-bit int), Java's remainder by the queue count (the sign of the dividend), made non-negative. The
remainder comes before the absolute value, so a hash of -2**31, whose absolute value no Java int
holds, still picks a queue in range (-2147483648 % 3 == -2: queue 2 of 3).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mqstore.engine.java.jhash import java_hash

QueueIds = np.ndarray[Any, np.dtype[np.int64]]


def shard_hash(key: str) -> int:
    """What picks a sharding key's queue: its Java ``String.hashCode``, signed, as a Java int."""
    return java_hash(key)


def shard_queue(hash_code: int, queue_count: int) -> int:
    """The queue RocketMQ's ``SelectMessageQueueByHash`` picks for a key of this hash among ``queue_count``.
    Java's remainder carries the dividend's sign, so its absolute value is the absolute value's remainder."""
    return abs(hash_code) % queue_count


def shard_queues(hash_codes: np.ndarray[Any, Any], queue_count: int) -> QueueIds:
    """``shard_queue`` of many hashes at once: C's remainder (``fmod``, truncated like Java's), then abs."""
    return np.abs(np.fmod(np.asarray(hash_codes, np.int64), queue_count))


class RoundRobin:
    """Each topic's turns: the k-th message a topic is given no queue for goes to queue k % queue_count.
    Not persisted: a restart begins every topic at its queue 0."""

    __slots__ = ("_taken",)

    def __init__(self) -> None:
        self._taken: dict[str, int] = {}

    def turns(self, topic: str, queue_count: int, count: int) -> QueueIds:
        """The queues of the topic's next ``count`` turns, in order."""
        return (self._take(topic, count) + np.arange(count, dtype=np.int64)) % queue_count

    def turn(self, topic: str, queue_count: int) -> int:
        """The queue of the topic's next turn (``turns`` of one, without an array per message)."""
        return self._take(topic, 1) % queue_count

    def _take(self, topic: str, count: int) -> int:
        """The topic's next ``count`` turns taken; the number of the first."""
        first = self._taken.get(topic, 0)
        self._taken[topic] = first + count
        return first
