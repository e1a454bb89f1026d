"""What a reader believes is published (actors.reader.state.PublishedStore), from the builders'
arrived notices and the files: a notice older than what a recheck read off the files moves nothing
back; a queue whose files were deleted and made again is learned afresh."""

from __future__ import annotations

import shutil
from pathlib import Path

from actors.reader.state import PublishedStore
from engine import Message, MessageStore, StoreConfig
from tests.conftest import TINY, FakeClock


def _put(store_dir: Path, clock: FakeClock, count: int, topic: str = "Orders") -> None:
    with MessageStore.open(store_dir, StoreConfig(geometry=TINY), now_ms=clock) as writer:
        writer.put_batch([Message(topic, f"m{i}".encode()) for i in range(count)], [0] * count)


def test_a_notice_older_than_the_files_moves_nothing_back(tmp_path: Path) -> None:
    clock = FakeClock()
    store_dir = tmp_path / "store"
    _put(store_dir, clock, 10)
    published = PublishedStore(store_dir, TINY, index_enabled=False, now_ms=clock)
    try:
        published.learn_from_files()  # as a recheck does: the files say 10
        assert published.published[("Orders", 0)] == 10
        assert published.on_arrived([("Orders", 0, 6)], 0) == []  # sent when the builder had applied 6
        assert published.published[("Orders", 0)] == 10  # a reset to 6 re-delivered 6..9 to offset consumers
        assert published.on_arrived([("Orders", 0, 12)], 0) == [("Orders", 0)]
    finally:
        published.close()


def test_a_queue_deleted_and_made_again_is_learned_afresh(tmp_path: Path) -> None:
    clock = FakeClock()
    store_dir, other = tmp_path / "store", tmp_path / "other"
    _put(store_dir, clock, 10)
    _put(other, clock, 3)
    published = PublishedStore(store_dir, TINY, index_enabled=False, now_ms=clock)
    try:
        published.learn_from_files()
        queue_dir = store_dir / "consumequeue" / "Orders"
        shutil.rmtree(queue_dir)
        shutil.copytree(other / "consumequeue" / "Orders", queue_dir)  # new files at the same names
        assert published.on_arrived([("Orders", 0, 3)], 0) == [("Orders", 0)]
        assert published.published[("Orders", 0)] == 3
    finally:
        published.close()
