"""mqstore.engine.reclaim.consumed on real files: who holds each commitlog file, and how far the log is consumed,
from the persisted offsets, the readers' marks and the consume queues."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.engine import Geometry, Message, MessageStore, StoreConfig
from mqstore.engine.ackindex.low_water import AckProgress, read_ack_progress, write_low_water
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.engine.reclaim.consumed import ACK, NO_GROUP, OFFSET, ConsumedFiles, Consumption, ReclaimError
from mqstore.engine.reclaim.retention import RetentionPolicy, delete_consumed_commitlog
from mqstore.engine.repair.verify import verify_store
from tests.conftest import FakeClock

GEOMETRY = Geometry(commitlog_file_size=8192, cq_entries_per_file=16, index_slot_count=16, index_entry_count=64)
COUNT = 120  # 300-byte bodies: about 20 records a file, six files


@pytest.fixture
def store(tmp_path: Path) -> MessageStore:
    store = MessageStore.open(tmp_path / "s", StoreConfig(geometry=GEOMETRY), now_ms=FakeClock(0))
    store.put_batch([Message("T", bytes(300)) for _ in range(COUNT)])
    return store


def _files(store: MessageStore) -> ConsumedFiles:
    return ConsumedFiles(store.path, GEOMETRY.cq_entries_per_file, reader_count=2)


def _persist(store: MessageStore, *commits: tuple[str, str, int, int]) -> None:
    offsets = ConsumerOffsets(lambda: 0)
    for group, topic, queue_id, next_offset in commits:
        offsets.commit(group, topic, queue_id, next_offset)
    offsets.persist(store.path / CONSUMER_OFFSET_FILE)


def _phys(store: MessageStore, queue_offset: int) -> int:
    return store.get("T", 0, queue_offset, 1).messages[0].phys_offset


def _read(store: MessageStore) -> Consumption:
    files = _files(store)
    try:
        return files.read(store.commitlog.min_offset)
    finally:
        files.close()


def test_a_topic_no_group_consumes_is_held_from_its_first_record(store: MessageStore) -> None:
    consumption = _read(store)
    assert [(h.kind, h.topic, h.queue_offset, h.phys_offset) for h in consumption.holders] == [(NO_GROUP, "T", 0, 0)]
    assert consumption.consumed_end == 0
    store.close()


def test_the_lowest_committed_offset_holds_and_a_file_below_it_may_go(store: MessageStore) -> None:
    _persist(store, ("A", "T", 0, 70), ("B", "T", 0, 50))
    consumption = _read(store)
    assert {(h.kind, h.group, h.queue_offset) for h in consumption.holders} == {(OFFSET, "A", 70), (OFFSET, "B", 50)}
    assert consumption.consumed_end == _phys(store, 50)
    deleted = delete_consumed_commitlog(store.commitlog, RetentionPolicy(), consumption.consumed_end)
    assert deleted == _phys(store, 50) // GEOMETRY.commitlog_file_size > 0
    assert store.commitlog.min_offset <= _phys(store, 50)
    store.close()
    assert verify_store(store.path).ok


def test_everything_consumed_leaves_the_newest_file(store: MessageStore) -> None:
    _persist(store, ("A", "T", 0, COUNT))
    consumption = _read(store)
    assert consumption.holders == () and consumption.consumed_end == store.commitlog.max_offset
    delete_consumed_commitlog(store.commitlog, RetentionPolicy(delete_file_batch_max=100), consumption.consumed_end)
    assert len(store.commitlog.queue.files) == 1
    store.close()


def test_an_ack_group_holds_from_its_marks_progress_or_from_the_start_without_one(store: MessageStore) -> None:
    (store.path / "queueindex" / "G" / "T" / "0").mkdir(parents=True)
    assert [(h.kind, h.queue_offset) for h in _read(store).holders] == [(ACK, 0)]  # no mark yet: nothing consumed
    base = _phys(store, 40) - _phys(store, 40) % GEOMETRY.commitlog_file_size
    write_low_water(store.path, 1, _phys(store, 40), [AckProgress("G", "T", 0, 40, 90, {base: 3})])
    consumption = _read(store)
    assert [(h.kind, h.group, h.queue_offset) for h in consumption.holders] == [(ACK, "G", 40)]
    assert consumption.consumed_end == _phys(store, 40)
    files = _files(store)
    try:
        spans = [(mf.file_base, mf.file_end, 0) for mf in store.commitlog.queue.files]
        held = files.describe(files.read(store.commitlog.min_offset), spans)
    finally:
        files.close()
    assert [h.reclaimable for h in held[:2]] == [True, True]
    assert next((f.file_base, [(x.holder.group, x.messages) for x in f.holds]) for f in held if f.holds) \
        == (base, [("G", 3)])  # unacked in its first held file: what the mark counted
    last = held[-1]
    assert last.newest and not last.reclaimable
    # past what it indexed (90), every entry of a file counts as held
    assert sum(x.messages for x in last.holds) == sum(
        1 for qo in range(90, COUNT) if _phys(store, qo) >= last.file_base)
    store.close()


def test_an_offset_group_and_an_ack_group_on_one_topic_both_hold(store: MessageStore) -> None:
    _persist(store, ("A", "T", 0, COUNT))
    write_low_water(store.path, 0, None, [AckProgress("G", "T", 0, 10, 10, {})])
    (store.path / "queueindex" / "G" / "T" / "0").mkdir(parents=True)
    assert _read(store).consumed_end == _phys(store, 10)
    store.close()


def test_two_marks_naming_one_queue_keep_the_one_that_got_less_far(tmp_path: Path) -> None:
    write_low_water(tmp_path, 0, None, [AckProgress("G", "T", 0, 30, 30, {})])
    write_low_water(tmp_path, 1, None, [AckProgress("G", "T", 0, 20, 25, {0: 1})])
    write_low_water(tmp_path, 2, 5, None)  # a mark without progress (keep_unacked alone)
    progress = read_ack_progress(tmp_path, 3)
    assert list(progress.values()) == [AckProgress("G", "T", 0, 20, 25, {0: 1})]


def test_unreadable_offsets_reclaim_nothing(store: MessageStore) -> None:
    (store.path / CONSUMER_OFFSET_FILE).parent.mkdir(parents=True, exist_ok=True)
    (store.path / CONSUMER_OFFSET_FILE).write_bytes(b"{garbage")
    files = _files(store)
    try:
        with pytest.raises(ReclaimError):
            files.read(store.commitlog.min_offset)
    finally:
        files.close()
    store.close()


def test_records_not_dispatched_yet_are_held(store: MessageStore) -> None:
    """A record without a consume-queue entry yet says nothing of who needs it: it is not consumed."""
    _persist(store, ("A", "T", 0, COUNT))
    files = _files(store)
    try:
        files.read(store.commitlog.min_offset)
        (store.path / "consumequeue" / ".dispatching").write_bytes((_phys(store, 30)).to_bytes(8, "little"))
        assert files.read(store.commitlog.min_offset).consumed_end == _phys(store, 30)
    finally:
        files.close()
    store.close()


def test_the_searched_valid_end_is_the_scanned_one(store: MessageStore) -> None:
    for count in (0, 1, 15, 16, 17):  # 16 entries a consume-queue file: ends inside, at and past a file's end
        store.put_batch([Message("U", bytes(10)) for _ in range(count)])
        cq = store.consume_queue("U", 0)
        if cq is not None:
            assert cq.searched_valid_end() == cq.scan_valid_end() == store.max_queue_offset("U", 0)
    store.close()
