"""What a reader believes is published (mqstore.actors.reader.state.PublishedStore), from the builders'
arrived notices and the files: a notice older than what a recheck read off the files moves nothing
back; a queue whose files were deleted and made again is learned afresh."""

from __future__ import annotations

import shutil
from pathlib import Path

from mqstore.actors.reader.state import PublishedStore
from mqstore.engine import Message, MessageStore, StoreConfig
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


def test_a_recheck_finds_entries_in_a_file_made_since_and_lists_the_directory_only_then(tmp_path: Path) -> None:
    """A recheck (every pull that finds nothing) lists the queue's directory only when what it knows
    reaches past the last file it maps: the builder fills a file (16 entries here) before the next."""
    clock = FakeClock()
    store_dir = tmp_path / "store"
    _put(store_dir, clock, 10)
    published = PublishedStore(store_dir, TINY, index_enabled=False, now_ms=clock)
    try:
        published.learn_from_files()
        cq = published.queues.get("Orders", 0)
        assert cq is not None
        listings: list[bool] = []
        refresh = cq.queue.refresh
        cq.queue.refresh = lambda: listings.append(refresh()) or listings[-1]  # type: ignore[method-assign]
        assert not published.recheck("Orders", 0) and listings == []  # nothing new, inside the first file
        _put(store_dir, clock, 6)  # notices dropped: 16, the first file just full
        assert published.recheck("Orders", 0) and published.published[("Orders", 0)] == 16 and listings == []
        _put(store_dir, clock, 20)  # into the second and third files
        assert published.recheck("Orders", 0) and listings == [True]
        assert published.published[("Orders", 0)] == 36
    finally:
        published.close()


def test_a_notice_older_than_the_files_after_retention_does_not_move_the_queue_back(tmp_path: Path) -> None:
    """Retention takes a queue's leading files, never its last: a notice older than what the files
    said is not taken for a queue made again (it was: the queue was forgotten and learned afresh at
    the notice's 30, which re-delivered 30..39)."""
    clock = FakeClock()
    store_dir = tmp_path / "store"
    _put(store_dir, clock, 40)
    published = PublishedStore(store_dir, TINY, index_enabled=False, now_ms=clock)
    try:
        published.learn_from_files()
        cq = published.queues.get("Orders", 0)
        assert cq is not None and len(cq.queue.files) == 3
        cq.queue.files[0].path.unlink()  # as retention deletes the oldest file
        assert published.on_arrived([("Orders", 0, 30)], 0) == []
        assert published.published[("Orders", 0)] == 40 and published.queues.get("Orders", 0) is cq
    finally:
        published.close()


def test_a_topic_deleted_under_the_reader_is_told_until_it_is_made_again(tmp_path: Path) -> None:
    """``deleted``, asked by every pull that finds nothing: a queue it maps whose directory is gone is
    a deleted topic (its maps closed), an unknown queue is not, and a topic made again is live again."""
    clock = FakeClock()
    store_dir, other = tmp_path / "store", tmp_path / "other"
    _put(store_dir, clock, 4)
    _put(other, clock, 2)
    published = PublishedStore(store_dir, TINY, index_enabled=False, now_ms=clock)
    try:
        published.learn_from_files()
        assert not published.deleted("Orders", 0)
        assert not published.deleted("Orders", 7)  # a queue it never mapped
        topic_dir = store_dir / "consumequeue" / "Orders"
        shutil.rmtree(topic_dir)
        assert published.deleted("Orders", 0)
        assert ("Orders", 0) not in published.published
        assert published.deleted("Orders", 1)  # the whole topic, while its directory is gone
        shutil.copytree(other / "consumequeue" / "Orders", topic_dir)
        assert not published.deleted("Orders", 0)
    finally:
        published.close()
