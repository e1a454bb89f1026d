"""What the hot actors count for the metrics (``mqstore.actors.metrics``): cheap per round, never per message.

- ``TopicCounts``: messages and bytes per topic since the process started, added a batch at a time
  (the writer's dispatch batches, a reader's pull replies);
- ``Deliveries``: what a reader's replies delivered, per topic (a ``TopicCounts``) and per group and
  topic (messages), one reply at a time (offset pulls and ack-mode pulls alike);
- ``Latencies``: a histogram as bucket counts (``LATENCY_BOUNDS_S``, Prometheus' ``le`` bounds), one
  observation per request or per round, weighted by how many requests it stands for.

Both travel in the stats events an actor already sends (``mqstore.actors.runtime.EventReporter``) as plain
values (``stats``); the supervisor keeps the last of each, and the metrics actor reads them from its
status. Counts restart from zero with the process, as a Prometheus counter may.
"""

from __future__ import annotations

import bisect
from typing import Any

from mqstore.engine.batch.dispatch import DispatchBatch

# seconds: 100 us .. 10 s, the span a send or a pull answers in
LATENCY_BOUNDS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                    5.0, 10.0)
MAX_TOPICS = 4096  # topics counted per process at most (broker.max_topics' default); more fold into ""
MAX_GROUP_TOPICS = 16_384  # (group, topic) pairs counted per reader at most; more fold into group "", topic ""


class TopicCounts:
    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}  # topic -> [messages, bytes]

    def add(self, topic: str, messages: int, size_bytes: int) -> None:
        counts = self.counts.get(topic)
        if counts is None:
            if len(self.counts) >= MAX_TOPICS:
                topic = ""
            counts = self.counts.setdefault(topic, [0, 0])
        counts[0] += messages
        counts[1] += size_bytes

    def add_batch(self, batch: DispatchBatch) -> None:
        """A dispatch batch's records, by topic (``DispatchBatch.topic_totals``)."""
        for topic, messages, size_bytes in batch.topic_totals():
            self.add(topic, messages, size_bytes)

    def stats(self) -> dict[str, list[int]]:
        """The counts themselves, not a copy: a report packs them only when it is sent."""
        return self.counts


class Deliveries:
    """A reader's deliveries since it started: per topic (messages, bytes) and per group and topic
    (messages), so that two groups reading one message count it once each. Pulls without a group
    count per topic only."""

    __slots__ = ("_pairs", "groups", "topics")

    def __init__(self) -> None:
        self.topics = TopicCounts()
        self.groups: dict[str, dict[str, int]] = {}  # group -> topic -> messages
        self._pairs = 0

    def add(self, group: str, topic: str, messages: int, size_bytes: int) -> None:
        self.topics.add(topic, messages, size_bytes)
        if not group:
            return
        by_topic = self.groups.get(group)
        if by_topic is not None and topic in by_topic:
            by_topic[topic] += messages
            return
        if self._pairs >= MAX_GROUP_TOPICS:
            group = topic = ""
        else:
            self._pairs += 1
        by_topic = self.groups.setdefault(group, {})
        by_topic[topic] = by_topic.get(topic, 0) + messages

    def stats(self) -> dict[str, Any]:
        """What a reader's report carries: ``topics_out`` and ``groups_out`` (the counts themselves)."""
        return {"topics_out": self.topics.counts, "groups_out": self.groups}


class Latencies:
    """Bucket counts (not cumulative: bucket i counts what took at most ``LATENCY_BOUNDS_S[i]`` and
    more than the bound before it; the last counts what took longer than every bound) and their sum."""

    __slots__ = ("buckets", "sum_s")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BOUNDS_S) + 1)
        self.sum_s = 0.0

    def observe(self, seconds: float, count: int = 1) -> None:
        self.buckets[bisect.bisect_left(LATENCY_BOUNDS_S, seconds)] += count
        self.sum_s += seconds * count

    def stats(self) -> dict[str, Any]:
        return {"buckets": self.buckets, "sum_s": self.sum_s}
