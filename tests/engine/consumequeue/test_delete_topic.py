"""A deleted topic's consume queues stay deleted: recovery resumes dispatch from how far the queues
were applied when it went (``.applied_floor``), not from the furthest entry the remaining queues
cover, which the deleted topic's newest records lay beyond."""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine import Message, MessageStore
from mqstore.engine.consumequeue.store import DELETED_PREFIX, ConsumeQueueStore

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


def _durable_log(monkeypatch: pytest.MonkeyPatch, store_dir: Path) -> list[tuple[str, str, bytes]]:
    """Every fsync (what it made durable: a file's bytes, a directory's entries) and every removal of
    a tree, in order, relative to the store."""
    log: list[tuple[str, str, bytes]] = []
    real_fsync, real_rmtree = os.fsync, shutil.rmtree

    def fsync(fd: int) -> None:
        real_fsync(fd)
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        content = b"" if path.is_dir() else path.read_bytes()
        log.append(("fsync", str(path.relative_to(store_dir)), content))

    def rmtree(path: Path | str, *args: Any, **kwargs: Any) -> None:
        log.append(("rmtree", str(Path(path).relative_to(store_dir)), b""))
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    return log


def test_the_floor_and_the_topic_leaving_are_durable_before_its_files_go(tmp_path: Path, open_store: OpenStore,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A power cut keeps only what was synced: a removal kept with the floor lost would let a normal
    start dispatch the topic again, and a removal cut short would leave queues with files missing."""
    store = open_store()
    store.put_batch([Message("Kept", f"k{i}".encode()) for i in range(5)])
    store.put_batch([Message("Gone", f"g{i}".encode()) for i in range(7)])
    entries_per_file = store.config.geometry.cq_entries_per_file
    end = store.commitlog.max_offset
    store.close()
    store_dir = (tmp_path / "store").resolve()
    log = _durable_log(monkeypatch, store_dir)
    assert _delete(store_dir, "Gone", end, entries_per_file)
    monkeypatch.undo()

    removals = [i for i, (op, _, _) in enumerate(log) if op == "rmtree"]
    assert removals, "the topic's files were never removed"
    before = log[:removals[0]]
    floor_bytes = struct.pack("<q", end)  # written whole under its own name, or renamed to it
    floor = [i for i, (op, path, content) in enumerate(before)
             if op == "fsync" and path.startswith("consumequeue/.applied_floor") and content == floor_bytes]
    assert floor, "the floor was not durable before the topic's files went"
    assert ("fsync", "consumequeue", b"") in before[floor[0] + 1:], "the floor's name was not durable"
    assert all(path != "consumequeue/Gone" for op, path, _ in log if op == "rmtree"), \
        "files removed under the topic's own name: a power cut keeps any subset of the removals"


def test_a_deleted_topic_left_half_removed_is_no_topic(tmp_path: Path, open_store: OpenStore) -> None:
    store = open_store()
    store.put_batch([Message("Gone", f"g{i}".encode()) for i in range(7)])
    entries_per_file = store.config.geometry.cq_entries_per_file
    store.close()
    root = tmp_path / "store" / "consumequeue"
    (root / "Gone").rename(root / f"{DELETED_PREFIX}Gone")  # a power cut after the renaming was synced
    queues = ConsumeQueueStore.open(root, entries_per_file)
    try:
        assert queues.topics() == {}
        assert not (root / f"{DELETED_PREFIX}Gone").exists()
    finally:
        queues.close()
