"""A deleted topic's consume queues stay deleted: recovery resumes dispatch from how far the queues
were applied when it went (``.applied_floor``), not from the furthest entry the remaining queues
cover, which the deleted topic's newest records lay beyond."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mqstore.engine import Message, MessageStore
from mqstore.engine.consumequeue.store import ConsumeQueueStore

OpenStore = Callable[..., MessageStore]


def _delete(store_dir: Path, topic: str, applied_end: int, entries_per_file: int) -> bool:
    queues = ConsumeQueueStore.open(store_dir / "consumequeue", entries_per_file)
    try:
        return queues.delete_topic(topic, applied_end)
    finally:
        queues.close()


def test_a_deleted_topic_holding_the_newest_records_is_not_dispatched_again(tmp_path: Path,
                                                                           open_store: OpenStore) -> None:
    store = open_store()
    store.put_batch([Message("Kept", f"k{i}".encode()) for i in range(5)])
    store.put_batch([Message("Gone", f"g{i}".encode()) for i in range(7)])
    entries_per_file = store.config.geometry.cq_entries_per_file
    end = store.commitlog.max_offset
    store.close()

    assert _delete(tmp_path / "store", "Gone", end, entries_per_file)
    assert not (tmp_path / "store" / "consumequeue" / "Gone").exists()
    assert not _delete(tmp_path / "store", "Gone", end, entries_per_file)  # asked again: nothing there

    reopened = open_store()
    assert sorted(reopened.topics()) == ["Kept"]
    assert reopened.max_queue_offset("Kept", 0) == 5
    assert reopened.recovery.cq_redispatched == 0
    assert reopened.commitlog.max_offset == end  # its records stay in the commitlog
    reopened.put(Message("Gone", b"again"))
    assert reopened.max_queue_offset("Gone", 0) == 1  # made again, from offset 0


def test_a_floor_past_a_torn_tail_comes_down_to_the_cut(tmp_path: Path, open_store: OpenStore) -> None:
    store = open_store()
    store.put_batch([Message("Gone", f"g{i}".encode()) for i in range(3)])
    entries_per_file = store.config.geometry.cq_entries_per_file
    end = store.commitlog.max_offset
    store.close()
    assert _delete(tmp_path / "store", "Gone", end, entries_per_file)
    queues = ConsumeQueueStore.open(tmp_path / "store" / "consumequeue", entries_per_file)
    try:
        assert queues.applied_end() == end
        queues.truncate_dirty(end - 1)
        assert queues.applied_floor() == end - 1
    finally:
        queues.close()
