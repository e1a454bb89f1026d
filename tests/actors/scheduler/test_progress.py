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
        progress.save(1, 0)
        assert read_reput_floor(tmp_path) == 100 << 20
        commitlog.close()
