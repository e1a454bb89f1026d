"""What the hot actors count: per-topic totals of a dispatch batch, whatever topics it holds, and
latency buckets with Prometheus' ``le`` bounds (a value on a bound counts in that bound's bucket)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mqstore.actors.meters import LATENCY_BOUNDS_S, MAX_GROUP_TOPICS, MAX_TOPICS, Deliveries, Latencies, TopicCounts
from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS, DispatchBatch
from mqstore.engine.batch.key_text import KeyText


def _batch(rows: list[tuple[int, int]], topics: list[str]) -> DispatchBatch:
    columns = np.zeros(len(rows), DISPATCH_COLUMNS)
    columns["topic"] = [t for t, _ in rows]
    columns["size"] = [s for _, s in rows]
    return DispatchBatch(columns, topics, KeyText.of([""] * len(rows), [""] * len(rows)))


@given(st.integers(1, 4).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, 10_000)), max_size=50))))
def test_topic_totals_of_a_batch_add_up_each_topics_rows(case: tuple[int, list[tuple[int, int]]]) -> None:
    n, rows = case
    topics = [f"T{i}" for i in range(n)]
    counts = TopicCounts()
    counts.add_batch(_batch(rows, topics))
    counts.add_batch(_batch(rows, topics))
    expected = {topics[t]: [2 * sum(1 for r in rows if r[0] == t), 2 * sum(s for r, s in rows if r == t)]
                for t in range(n) if any(r[0] == t for r in rows)}
    assert counts.stats() == expected


def test_topics_past_the_limit_fold_into_one_row() -> None:
    counts = TopicCounts()
    for i in range(MAX_TOPICS + 3):
        counts.add(f"T{i}", 1, 10)
    assert len(counts.stats()) == MAX_TOPICS + 1
    assert counts.stats()[""] == [3, 30]


def test_a_latency_on_a_bound_counts_in_that_bound_and_past_all_in_the_last() -> None:
    latencies = Latencies()
    latencies.observe(LATENCY_BOUNDS_S[0])
    latencies.observe(LATENCY_BOUNDS_S[3], 5)
    latencies.observe(LATENCY_BOUNDS_S[-1] * 2)
    stats = latencies.stats()
    assert stats["buckets"][0] == 1 and stats["buckets"][3] == 5 and stats["buckets"][-1] == 1
    assert sum(stats["buckets"]) == 7
    assert abs(stats["sum_s"] - (LATENCY_BOUNDS_S[0] + 5 * LATENCY_BOUNDS_S[3] + LATENCY_BOUNDS_S[-1] * 2)) < 1e-9


def test_deliveries_count_per_group_and_topic_beside_the_topic_totals() -> None:
    delivered = Deliveries()
    delivered.add("G1", "T", 4, 400)
    delivered.add("G2", "T", 4, 400)
    delivered.add("G1", "T", 1, 100)
    delivered.add("G1", "U", 2, 20)
    delivered.add("", "T", 3, 300)  # a pull without a group: the topic's total only
    assert delivered.stats() == {"topics_out": {"T": [12, 1200], "U": [2, 20]},
                                 "groups_out": {"G1": {"T": 5, "U": 2}, "G2": {"T": 4}}}


def test_group_topic_pairs_past_the_limit_fold_into_one() -> None:
    delivered = Deliveries()
    for i in range(MAX_GROUP_TOPICS + 2):
        delivered.add(f"G{i}", "T", 1, 1)
    delivered.add("G0", "T", 1, 1)
    groups = delivered.stats()["groups_out"]
    assert groups[""] == {"": 2} and groups["G0"] == {"T": 2}
    assert sum(len(by_topic) for by_topic in groups.values()) == MAX_GROUP_TOPICS + 1
