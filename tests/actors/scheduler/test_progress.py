"""The scheduler's progress: a level moves past an entry only in order, copies stored out of order wait in
``ahead``, the floor stays at or below every copy the saved offsets do not cover, and a restart finds
the copies made after the last save in the commitlog."""

from __future__ import annotations

from pathlib import Path

from mqstore.actors.scheduler.progress import Copy, Progress
from mqstore.engine import Message, MessageStore
from mqstore.engine.delay.offsets import read_delay_offsets, read_reput_floor
from mqstore.engine.log.commitlog import CommitLog


def put_copy(store: MessageStore, level: int, queue_offset: int, topic: str = "Real") -> int:
    result = store.put(Message(topic, b"copy", properties={"DELAY_OFFSET": f"{level}:{queue_offset}"}), queue_id=0)
    assert result.ok
    return result.phys_offset


def test_in_order_ahead_and_floor(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path) as store:
        commitlog = CommitLog.open(tmp_path / "commitlog", store.config.geometry.commitlog_file_size, writable=False)
        progress = Progress.load(tmp_path, 3, commitlog)
        assert progress.offsets == {1: 0, 2: 0, 3: 0} and read_reput_floor(tmp_path) == 0
        progress.delivered(1, 1, Copy("Real", 0, 500))  # entry 0 refused for now: 1 waits ahead
        assert progress.offsets[1] == 0 and progress.already_stored(1, 1, ("Real", 0))
        assert not progress.already_stored(1, 1, ("Other", 0)) and progress.floor() == 500
        progress.delivered(1, 0, Copy("Real", 0, 700))
        assert progress.offsets[1] == 2 and not progress.ahead[1] and progress.floor() == 700
        progress.delivered(2, 0, None)  # given up on: passed
        progress.on_flushed(701)
        progress.save(1, 0)
        assert read_delay_offsets(tmp_path).offsets == {1: 2, 2: 1, 3: 0} and read_reput_floor(tmp_path) == 700
        commitlog.close()


def test_a_restart_counts_the_copies_stored_after_the_last_save(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path) as store:
        size = store.config.geometry.commitlog_file_size
        commitlog = CommitLog.open(tmp_path / "commitlog", size, writable=False)
        first = Progress.load(tmp_path, 2, commitlog)
        phys = put_copy(store, 1, 0)
        first.delivered(1, 0, Copy("Real", 0, phys))
        first.on_flushed(phys + 1)
        first.save(1, 0)
        # then, unsaved when the process is killed: copies of 1:1 and 1:3 (1:2 refused), and a
        # record that names a schedule entry but went elsewhere (a dead letter keeps its properties)
        put_copy(store, 1, 1)
        put_copy(store, 1, 3)
        put_copy(store, 2, 0, topic="%DLQ%G")
        store.flush()
        again = Progress.load(tmp_path, 2, commitlog)
        assert again.offsets == {1: 1, 2: 0}
        assert again.recover(commitlog) == 3
        assert again.already_stored(1, 1, ("Real", 0)) and again.already_stored(1, 3, ("Real", 0))
        assert not again.already_stored(1, 2, ("Real", 0))
        assert not again.already_stored(2, 0, ("Real", 0))  # the copy went to another topic: not this entry's
        commitlog.close()


def test_entries_given_up_out_of_order_are_passed_and_an_idle_floor_moves_on(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path) as store:
        commitlog = CommitLog.open(tmp_path / "commitlog", store.config.geometry.commitlog_file_size, writable=False)
        progress = Progress.load(tmp_path, 1, commitlog)
        progress.delivered(1, 1, None)  # refused for good (or its record gone) while entry 0 waits
        assert progress.given_up(1, 1) and progress.offsets[1] == 0 and progress.floor() == 0
        progress.idle_at(10 << 20)  # something waits ahead: the floor stays
        assert progress.floor() == 0
        progress.delivered(1, 0, Copy("Real", 0, 300))
        assert progress.offsets[1] == 2 and not progress.ahead[1]
        progress.idle_at(100 << 20)
        assert progress.floor() == 100 << 20 and progress.dirty
        progress.on_flushed(301)
        progress.save(1, 0)
        assert read_reput_floor(tmp_path) == 100 << 20
        commitlog.close()


def test_progress_waits_for_the_flush_past_its_copies(tmp_path: Path) -> None:
    """ASYNC_FLUSH: a PUT_OK copy is in the page cache only. The offsets that count it reach the disk
    once the commitlog is flushed past it, never before (a power cut would keep the mark and lose the
    copy); delivery goes on meanwhile, and the newest state the flush covers is the one written."""
    with MessageStore.open(tmp_path) as store:
        commitlog = CommitLog.open(tmp_path / "commitlog", store.config.geometry.commitlog_file_size, writable=False)
        progress = Progress.load(tmp_path, 1, commitlog)
        first, second = put_copy(store, 1, 0), put_copy(store, 1, 1)
        progress.on_flushed(first)  # durable up to the first copy's first byte: not past it
        progress.delivered(1, 0, Copy("Real", 0, first))
        progress.save(1, 0)
        assert read_delay_offsets(tmp_path).offsets.get(1, 0) == 0 and read_reput_floor(tmp_path) == 0
        progress.delivered(1, 1, Copy("Real", 0, second))  # delivery goes on in memory
        progress.save(2, 10_000)
        assert progress.offsets[1] == 2 and read_delay_offsets(tmp_path).offsets.get(1, 0) == 0
        progress.on_flushed(second)  # past the first copy only: the state that counts it alone
        progress.save(3, 10_001)
        assert read_delay_offsets(tmp_path).offsets == {1: 1} and read_reput_floor(tmp_path) == first
        progress.on_flushed(second + 1)
        progress.save(4, 10_002, force=True)  # a stop writes only what the flush covers: here all
        assert read_delay_offsets(tmp_path).offsets == {1: 2} and read_reput_floor(tmp_path) == second
        commitlog.close()


def test_a_stop_before_the_flush_leaves_the_copies_to_the_next_start(tmp_path: Path) -> None:
    """A stop (or a kill) with copies the flush has not reached saves nothing that counts them; the
    next start reads them off the commitlog from the saved floor, so none is sent twice."""
    with MessageStore.open(tmp_path) as store:
        commitlog = CommitLog.open(tmp_path / "commitlog", store.config.geometry.commitlog_file_size, writable=False)
        progress = Progress.load(tmp_path, 1, commitlog)
        phys = put_copy(store, 1, 0)
        progress.delivered(1, 0, Copy("Real", 0, phys))
        progress.save(1, 0, force=True)
        assert read_delay_offsets(tmp_path).offsets.get(1, 0) == 0 and read_reput_floor(tmp_path) <= phys
        again = Progress.load(tmp_path, 1, commitlog)
        assert again.recover(commitlog) == 1 and again.already_stored(1, 0, ("Real", 0))
        commitlog.close()
