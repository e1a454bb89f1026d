"""What many ack-mode queues cost a reader: found by scripts/survival/hostile.py (an ack-group flood), each
test named after the bug it pins."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actors.config import load_config
from actors.reader.ack_groups import IDLE_FLUSHES_PER_TICK, AckGroups
from actors.reader.state import PublishedStore
from engine import Geometry, MessageStore, StoreConfig
from engine.ackindex.queue_index import PublishEntry, QueueIndex

GEOMETRY = Geometry(commitlog_file_size=64 * 1024, cq_entries_per_file=64, index_slot_count=16, index_entry_count=64)


def _groups(tmp_path: Path, **retention: Any) -> AckGroups:
    store_dir = tmp_path / "store"
    MessageStore.open(store_dir, StoreConfig(geometry=GEOMETRY)).close()
    config = load_config(store_dir, retention=retention)
    runtime = SimpleNamespace(config=config, endpoints=config.endpoints, report=lambda *a, **k: None)
    published = PublishedStore(store_dir, GEOMETRY, index_enabled=False, now_ms=lambda: 0)
    return AckGroups(runtime, 0, published, lambda: 0)  # type: ignore[arg-type]


def test_readers_skip_the_unacked_low_water_unless_retention_keeps_unacked(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every second each reader read the lowest unacked message of every ack-mode queue it owns (a
    segment parse each) to write a low-water file only retention's keep_unacked reads: with 256
    queues a reader answered its clients a second late. Without keep_unacked it is not computed."""
    groups = _groups(tmp_path)

    def not_needed() -> None:
        raise AssertionError("low water computed without keep_unacked")
    monkeypatch.setattr(groups, "low_water_phys", not_needed)
    groups.tick(10_000)
    assert not list((tmp_path / "store").rglob("lowwater-*.json"))
    kept = _groups(tmp_path / "kept", keep_unacked=True)
    kept.tick(10_000)
    assert list((tmp_path / "kept" / "store").rglob("lowwater-0.json"))


def test_lowest_unacked_reads_a_window_not_the_whole_segment(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """lowest_unacked_seq_id read its whole first live segment (16,384 entries, an object each) to
    return the first one."""
    index = QueueIndex.open(tmp_path / "q")
    try:
        index.publish_many([PublishEntry(seq, bytes(16), 10) for seq in range(5000)])
        index.deliver([0, 1, 2])
        index.ack([0, 1])
        ranges: list[tuple[int, int]] = []
        read = QueueIndex.read
        monkeypatch.setattr(QueueIndex, "read", lambda self, lo, hi: ranges.append((lo, hi)) or read(self, lo, hi))
        assert index.lowest_unacked_seq_id() == 2
        assert ranges == [(0, 64)]
    finally:
        index.close()


def test_idle_journals_are_flushed_a_few_per_turn_not_all_at_once(tmp_path: Path) -> None:
    """A reader moved every idle queue's journal into segment files in one turn of its loop: with
    256 ack-mode queues going idle together, its clients waited 4 s. Now a few per turn."""
    groups = _groups(tmp_path)
    flushed: list[int] = []
    for i in range(40):
        index = SimpleNamespace(dirty_count=1, flush=lambda i=i: flushed.append(i))
        groups.queues[("G", "T", i)] = SimpleNamespace(next_deadline_ms=lambda: None, dead=False,  # type: ignore[assignment]
                                                       index=index)
        groups.last_op_ms[("G", "T", i)] = 0
    groups.tick(10_000)
    assert flushed == list(range(IDLE_FLUSHES_PER_TICK))
