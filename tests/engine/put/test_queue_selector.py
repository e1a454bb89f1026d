"""The queue a message goes to when its producer names none: RocketMQ's shard rule, one message and
many at once, and the round-robin turns."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.java.jhash import java_hash
from mqstore.engine.put.queue_selector import RoundRobin, shard_hash, shard_queue, shard_queues

INT_MIN = -(2**31)
hash_codes = st.one_of(st.just(INT_MIN), st.just(2**31 - 1), st.integers(INT_MIN, 2**31 - 1))
queue_counts = st.one_of(st.integers(1, 16), st.integers(1, 1 << 16))


def _java_remainder(dividend: int, divisor: int) -> int:
    """Java's ``%`` on ints: truncated division, so the remainder has the dividend's sign."""
    quotient = abs(dividend) // divisor * (1 if dividend >= 0 else -1)
    return dividend - divisor * quotient


@given(hash_code=hash_codes, queue_count=queue_counts)
def test_shard_queue_is_rocketmqs_select_message_queue_by_hash(hash_code: int, queue_count: int) -> None:
    """``value = arg.hashCode() % mqs.size(); if (value < 0) value = Math.abs(value);``"""
    assert shard_queue(hash_code, queue_count) == abs(_java_remainder(hash_code, queue_count))


@given(hash_codes=st.lists(hash_codes, max_size=50), queue_count=queue_counts)
def test_many_shard_queues_are_each_shard_queue(hash_codes: list[int], queue_count: int) -> None:
    as_column = np.array(hash_codes, dtype="<i4")  # as the producer's column carries them
    assert shard_queues(as_column, queue_count).tolist() == [shard_queue(h, queue_count) for h in hash_codes]


def test_a_key_hashing_to_int_min_picks_rocketmqs_queue_not_zero() -> None:
    """Masking abs(hash) with 0x7FFFFFFF made a hash of -2**31 queue 0 of any count."""
    assert shard_hash("polygenelubricants") == java_hash("polygenelubricants") == INT_MIN
    assert [shard_queue(INT_MIN, n) for n in (1, 2, 3, 5, 6, 7, 8)] == [0, 0, 2, 3, 2, 2, 0]
    assert shard_queues(np.array([INT_MIN, -7, 7]), 4).tolist() == [0, 3, 3]  # Java: -7 % 4 == -3


@given(takes=st.lists(st.tuples(st.sampled_from(["A", "B"]), st.integers(0, 9), st.booleans()), max_size=30),
       queue_count=st.integers(1, 5))
def test_round_robin_turns_one_at_a_time_and_many_at_once_alike(takes: list[tuple[str, int, bool]],
                                                                 queue_count: int) -> None:
    """Each topic's k-th turn is queue k % queue_count, whether turns are taken singly or in batches."""
    robin = RoundRobin()
    taken: dict[str, list[int]] = {"A": [], "B": []}
    for topic, count, singly in takes:
        if singly:
            taken[topic] += [robin.turn(topic, queue_count) for _ in range(count)]
        else:
            taken[topic] += robin.turns(topic, queue_count, count).tolist()
    for turns in taken.values():
        assert turns == [k % queue_count for k in range(len(turns))]
