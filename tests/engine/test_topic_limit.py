"""Topics made on demand are bounded (found by scripts/survival/hostile, a topic flood), refused when
auto-creation is off, and a deleted one leaves the table at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.engine.meta.topics import TopicError, TopicTable, UnknownTopicError


def test_auto_created_topics_are_bounded_by_max_topics(tmp_path: Path) -> None:
    """Every send to a new topic created it, with no limit: one client sending to 3,000 new topics
    made the writer rewrite topics.json 3,000 times, every other producer waiting behind it. Past
    ``max_topics`` a new topic is refused (the writer answers MESSAGE_ILLEGAL); known ones go on."""
    table = TopicTable.load(tmp_path, lambda: 0, max_topics=2)
    table.get_or_create("A", 4)
    table.get_or_create("B", 4)
    with pytest.raises(TopicError, match="past 2 topics"):
        table.get_or_create("C", 4)
    assert table.get_or_create("A", 4).queue_count == 4
    assert table.create("B", 8).queue_count == 8  # a known topic still gains queues
    assert sorted(TopicTable.load(tmp_path, lambda: 0).topics) == ["A", "B"]


def test_a_burst_of_new_topics_costs_one_topics_write_not_one_each(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer rewrote and fsynced topics.json for every new topic, inside the send that made it:
    3,000 new topics cost the other producers 98 % of their throughput (121 sends in 68 s). Its
    table is now deferred: the burst is written once, at the writer's next tick."""
    table = TopicTable.load(tmp_path, lambda: 0, deferred=True)
    writes: list[int] = []
    persist = TopicTable.persist
    monkeypatch.setattr(TopicTable, "persist", lambda self: writes.append(1) or persist(self))
    for i in range(100):
        table.get_or_create(f"T{i}", 4)
    assert writes == [] and table.dirty
    table.flush()
    table.flush()
    assert writes == [1] and not table.dirty
    assert len(TopicTable.load(tmp_path, lambda: 0).topics) == 100


def test_with_auto_create_off_a_send_to_an_unknown_topic_is_refused(tmp_path: Path) -> None:
    table = TopicTable.load(tmp_path, lambda: 0, auto_create=False)
    with pytest.raises(UnknownTopicError, match="auto_create_topics is off"):
        table.get_or_create("Nowhere", 4)
    table.create("Orders", 2)
    assert table.get_or_create("Orders", 4).queue_count == 2
    # the broker's own dead-letter and retry topics are made whatever auto_create says, or an ack-mode
    # group's dead letters would be refused
    assert table.get_or_create("%DLQ%G", 1).queue_count == 1
    assert table.get_or_create("%RETRY%G", 1).queue_count == 1
    assert sorted(TopicTable.load(tmp_path, lambda: 0).topics) == ["%DLQ%G", "%RETRY%G", "Orders"]


def test_a_deleted_topic_leaves_the_table_at_once(tmp_path: Path) -> None:
    table = TopicTable.load(tmp_path, lambda: 0, deferred=True)
    table.get_or_create("Orders", 4)
    table.flush()
    assert table.delete("Orders") and not table.delete("Orders")
    assert TopicTable.load(tmp_path, lambda: 0).topics == {}  # persisted by delete itself, not a later flush
