"""What many ack-mode queues cost a reader: found by scripts/survival/hostile (an ack-group flood), each
test named after the bug it pins."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.reader.ack_groups import IDLE_FLUSHES_PER_TICK, AckGroups
from mqstore.actors.reader.ack_queue import Located
from mqstore.actors.reader.state import PublishedStore
from mqstore.engine import Geometry, MessageStore, StoreConfig
from mqstore.engine.ackindex.queue_index import PublishEntry, QueueIndex

GEOMETRY = Geometry(commitlog_file_size=64 * 1024, cq_entries_per_file=64, index_slot_count=16, index_entry_count=64)


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    context: zmq.Context[Any] = zmq.Context()
    yield context
    context.term()


def _groups(tmp_path: Path, ctx: zmq.Context[Any], **retention: Any) -> AckGroups:
    store_dir = tmp_path / "store"
    MessageStore.open(store_dir, StoreConfig(geometry=GEOMETRY)).close()
    config = load_config(store_dir, retention=retention)
    published = PublishedStore(store_dir, GEOMETRY, index_enabled=False, now_ms=lambda: 0)
    return AckGroups(config, 0, published, ctx=ctx, ingress=config.endpoints.ingress, now_ms=lambda: 0)


def test_readers_skip_the_unacked_low_water_unless_retention_keeps_unacked(tmp_path: Path, ctx: zmq.Context[Any],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every second each reader read the lowest unacked message of every ack-mode queue it owns (a
    segment parse each) to write a low-water file only retention's keep_unacked reads: with 256
    queues a reader answered its clients a second late. Without keep_unacked it is not computed."""
    groups = _groups(tmp_path, ctx)

    def not_needed() -> None:
        raise AssertionError("low water computed without keep_unacked")
    monkeypatch.setattr(groups.queues, "low_water_phys", not_needed)
    groups.tick(10_000)
    assert not list((tmp_path / "store").rglob("lowwater-*.json"))
    kept = _groups(tmp_path / "kept", ctx, keep_unacked=True)
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


def test_idle_journals_are_flushed_a_few_per_turn_not_all_at_once(tmp_path: Path, ctx: zmq.Context[Any]) -> None:
    """A reader moved every idle queue's journal into segment files in one turn of its loop: with
    256 ack-mode queues going idle together, its clients waited 4 s. Now a few per turn."""
    groups = _groups(tmp_path, ctx)
    queues = []
    for i in range(40):
        q = groups.queues.get(("G", "T", i), create=True)  # opened at 0, idle since
        assert q is not None
        q.publish([Located(0, 0, 100)], 1)
        queues.append(q)
    assert all(q.index.dirty_count for q in queues)
    groups.tick(10_000)
    flushed = [i for i, q in enumerate(queues) if not q.index.dirty_count]
    assert flushed == list(range(IDLE_FLUSHES_PER_TICK))
    groups.close()
