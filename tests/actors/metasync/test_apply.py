"""The slave's side of the metadata sync on a real store directory: the topics file replaced only when
the master's data version changes, the delay offsets when they differ, and a timer checkpoint a
promoted timer actor opens as one that enqueued nothing yet."""

from __future__ import annotations

import json
from pathlib import Path

from mqstore.actors.metasync.apply import apply_delay_offsets, apply_timer_checkpoint, apply_topics
from mqstore.actors.metasync.fetch import TimerProgress
from mqstore.engine.delay.offsets import DelayOffsets, read_delay_offsets
from mqstore.engine.meta.data_version import DataVersion
from mqstore.engine.meta.topics import TopicConfig, TopicTable
from mqstore.engine.timer.checkpoint import TimerCheckpoint


def test_topics_replaced_when_the_masters_version_changes(tmp_path: Path) -> None:
    v1 = DataVersion(0, 1_700_000_000_000, 3)
    assert apply_topics(tmp_path, {"A": TopicConfig("A", 4)}, v1)
    assert not apply_topics(tmp_path, {"A": TopicConfig("A", 4)}, v1)
    doc = json.loads((tmp_path / "config" / "topics.json").read_bytes())
    assert doc == {"dataVersion": {"counter": 3, "stateVersion": 0, "timestamp": 1_700_000_000_000},
                   "topicConfigTable": {"A": {"topicName": "A", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                                              "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}}}
    assert apply_topics(tmp_path, {"B": TopicConfig("B", 2)}, DataVersion(0, 1_700_000_000_500, 4))
    table = TopicTable.load(tmp_path, lambda: 0)  # what a promoted slave's writer loads
    assert set(table.topics) == {"B"} and table.topics["B"].queue_count == 2


def test_delay_offsets_written_when_they_differ(tmp_path: Path) -> None:
    master = DelayOffsets({1: 5, 3: 2}, 7)
    assert apply_delay_offsets(tmp_path, master, 1)
    assert not apply_delay_offsets(tmp_path, master, 2)
    assert read_delay_offsets(tmp_path) == master


def test_timer_checkpoint_opens_as_nothing_enqueued_at_the_masters_read_time(tmp_path: Path) -> None:
    progress = TimerProgress(1_700_000_001_000, 4096, 17, 15, DataVersion(0, 1_700_000_000_123, 9))
    assert apply_timer_checkpoint(tmp_path, progress)
    assert not apply_timer_checkpoint(tmp_path, progress)
    checkpoint = TimerCheckpoint.open(tmp_path)
    try:
        assert not checkpoint.created
        assert checkpoint.last_read_ms == 1_700_000_001_000
        assert checkpoint.next_queue_offset == 0 and checkpoint.log_flushed_pos == 0  # its timerlog is empty
        assert checkpoint.master_queue_offset == 15 and checkpoint.counter == 9
        assert (checkpoint.delivered_slot_ms, checkpoint.delivered_pos, checkpoint.in_flight_phys) == (-1, -1, -1)
    finally:
        checkpoint.close()
