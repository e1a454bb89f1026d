"""Consumer lag, the one computation the readers, the offline commands and the metrics share."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.meta.offsets import ConsumerOffsets
from mqstore.engine.read.group_lag import NEVER, group_lags, groups_in, queue_lag


def _store_ms(queue_offset: int) -> int:
    return 1_000 + queue_offset


def test_lag_counts_what_the_group_has_not_consumed() -> None:
    q = queue_lag("T", 0, 5, 0, 7, _store_ms)
    assert (q.lag, q.last_consume_ms) == (2, 1_004)  # the last consumed is offset 4
    never = queue_lag("T", 1, NEVER, 3, 7, _store_ms)
    assert (never.lag, never.last_consume_ms) == (4, 0)  # from the min offset, nothing consumed
    expired = queue_lag("T", 2, 1, 3, 7, _store_ms)
    assert (expired.lag, expired.last_consume_ms) == (4, 0)  # retention took what it had not consumed
    gone = queue_lag("T", 3, 5, 0, 7, lambda q: -1)
    assert gone.last_consume_ms == 0


@given(st.integers(-1, 1_000), st.integers(0, 1_000), st.integers(0, 1_000))
def test_lag_is_never_negative_and_never_more_than_the_queue_holds(committed: int, lo: int, span: int) -> None:
    q = queue_lag("T", 0, committed, lo, lo + span, _store_ms)
    assert 0 <= q.lag <= span
    assert q.lag == (lo + span) - max(committed, lo) or committed > lo + span
    assert q.last_consume_ms == (0 if not lo < committed <= lo + span else _store_ms(committed - 1))


def test_group_lags_cover_every_queue_of_every_topic_the_group_committed_on() -> None:
    offsets = ConsumerOffsets(lambda: 0, {"A@G": {0: 2, 1: 0}, "B@G": {0: 1}, "A@H": {0: 9}})
    table = offsets.table
    assert groups_in(table) == {"G": ["A", "B"], "H": ["A"]}
    spans = {"A": {0: (0, 4), 1: (0, 3), 2: (0, 1)}, "B": {0: (0, 1)}}
    lags = group_lags("G", offsets.topics_of("G"), table, lambda topic: spans[topic],
                      lambda topic, queue_id, q: 1_000 + q)
    assert [(q.topic, q.queue_id, q.committed_offset, q.lag) for q in lags] == [
        ("A", 0, 2, 2), ("A", 1, 0, 3), ("A", 2, NEVER, 1), ("B", 0, 1, 0)]
    assert group_lags("nobody", offsets.topics_of("nobody"), table, lambda topic: spans[topic],
                      lambda *a: 0) == []


class _NoScan(dict[str, dict[int, int]]):
    """An offset table that refuses a pass over all its keys."""

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the whole table was scanned")

    def keys(self) -> Iterator[str]:  # type: ignore[override]
        raise AssertionError("the whole table was scanned")


def test_describing_one_group_reads_only_its_keys_whatever_the_other_groups() -> None:
    # the metrics describe every group each collection: a pass over the table per group made a
    # collection's cost grow with the square of the groups
    table = _NoScan({f"A@G{g}": {0: g} for g in range(100)})
    lags = group_lags("G7", ["A"], table, lambda topic: {0: (0, 10)}, lambda *a: 0)
    assert [(q.topic, q.committed_offset, q.lag) for q in lags] == [("A", 7, 3)]


def test_the_topics_of_a_group_follow_commits_and_deleted_topics() -> None:
    offsets = ConsumerOffsets(lambda: 0, {"A@G": {0: 1}, "B@H": {0: 1}})
    offsets.commit("G", "C", 0, 2)
    offsets.commit("H", "A", 0, 2)
    assert {g: offsets.topics_of(g) for g in ("G", "H")} == groups_in(offsets.table) == {
        "G": ["A", "C"], "H": ["A", "B"]}
    offsets.delete_topic("A")
    offsets.delete_topic("B")
    assert (offsets.topics_of("G"), offsets.topics_of("H")) == (["C"], [])
    assert groups_in(offsets.table) == {"G": ["C"]}
