"""Retention with a fake clock, and the watermark decisions (RocketMQ's CleanCommitLogService)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mqstore.engine import Geometry, GetStatus, Message, MessageStore, StoreConfig
from mqstore.engine.meta.metafile import create_abort
from mqstore.engine.reclaim.retention import (
    RetentionPolicy,
    decide,
    delete_consumed_commitlog,
    delete_expired_commitlog,
    disk_used_ratio,
    ends_by,
)
from mqstore.engine.repair.verify import verify_store
from tests.conftest import FakeClock

GEOMETRY = Geometry(commitlog_file_size=8192, cq_entries_per_file=16, index_slot_count=16, index_entry_count=64)
HOUR_MS = 3_600_000


def _local_ms(hour: int) -> int:
    """A time today at ``hour`` local time (the delete hours are local, like RocketMQ's)."""
    t = time.localtime()
    return int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1)) * 1000)


def _age(path: Path, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


@pytest.mark.parametrize("ratio, delete, immediately, full", [
    (0.10, False, False, False), (0.76, True, False, False), (0.86, True, True, False), (0.91, True, True, True),
])
def test_watermarks(ratio: float, delete: bool, immediately: bool, full: bool) -> None:
    d = decide(RetentionPolicy(), ratio, _local_ms(13))
    assert (d.delete, d.clean_immediately, d.disk_full) == (delete, immediately, full)
    assert bool(d.reason) == delete


def test_delete_hour_and_manual() -> None:
    policy = RetentionPolicy(delete_when="02;04")
    assert decide(policy, 0.1, _local_ms(4)).delete and decide(policy, 0.1, _local_ms(2)).delete
    assert not decide(policy, 0.1, _local_ms(3)).delete
    assert decide(policy, 0.1, _local_ms(3), manual=True).delete
    with pytest.raises(ValueError):
        RetentionPolicy(delete_when="25").validate()
    with pytest.raises(ValueError):
        RetentionPolicy(disk_clean_forcibly_ratio=0.95).validate()


def test_disk_used_ratio_is_a_ratio(tmp_path: Path) -> None:
    assert 0 < disk_used_ratio(tmp_path) <= 1


def test_expired_files_deleted_oldest_first_then_derived(tmp_path: Path) -> None:
    """testDeleteExpiredFileByTime and CleanConsumeQueueService: old commitlog files go at the delete
    hour (never the newest, never past a young one), consume-queue and index files below follow,
    min offsets move, and the store still verifies clean."""
    clock = FakeClock(_local_ms(4))
    store = MessageStore.open(tmp_path / "s", StoreConfig(geometry=GEOMETRY), now_ms=clock)
    results = store.put_batch([Message("Orders", bytes(300), keys=[f"k{i}"]) for i in range(120)])
    files = store.commitlog.queue.files
    assert len(files) >= 5
    old = clock.now - 100 * HOUR_MS
    for mf in files[:3]:
        _age(mf.path, old)
    for mf in files[3:]:
        _age(mf.path, clock.now)
    _age(files[-1].path, old)  # the newest file is never deleted, however old
    policy = RetentionPolicy(file_reserved_hours=72)
    decision = store.clean_expired(policy, used_ratio=0.1)
    assert decision.delete and not decision.clean_immediately
    assert store.commitlog.min_offset == 3 * GEOMETRY.commitlog_file_size
    min_qo = store.min_queue_offset("Orders", 0)
    first_kept = next(r for r in results if r.phys_offset >= store.commitlog.min_offset)
    assert min_qo == first_kept.queue_offset
    too_small = store.get("Orders", 0, 0)
    assert too_small.status is GetStatus.OFFSET_TOO_SMALL and too_small.next_queue_offset == min_qo
    assert store.get("Orders", 0, min_qo).messages[0].phys_offset == first_kept.phys_offset
    assert store.query_by_key("Orders", "k0") == []
    assert [m.phys_offset for m in store.query_by_key("Orders", "k119")] == [results[-1].phys_offset]
    store.close()
    assert verify_store(tmp_path / "s").ok
    with MessageStore.open(tmp_path / "s", now_ms=clock) as reopened:  # and it recovers from there
        assert reopened.commitlog.min_offset == 3 * GEOMETRY.commitlog_file_size
        assert reopened.min_queue_offset("Orders", 0) == min_qo


def test_a_crash_after_retention_recovers_queues_whose_first_entries_lost_their_records(tmp_path: Path) -> None:
    """Abnormal recovery walked each consume queue down checking entries against their records; the
    entries whose commitlog file retention had deleted counted as torn, the queue was cut below
    them, and the re-dispatch then failed (ConsumeQueueOrderError): the store did not open. Seen in
    the full-disk harness, whose full disk makes retention delete files."""
    clock = FakeClock(_local_ms(4))
    store = MessageStore.open(tmp_path / "s", StoreConfig(geometry=GEOMETRY), now_ms=clock)
    results = store.put_batch([Message("Orders", bytes(300), keys=[f"k{i}"]) for i in range(120)])
    for mf in store.commitlog.queue.files[:3]:
        _age(mf.path, clock.now - 100 * HOUR_MS)
    store.clean_expired(RetentionPolicy(file_reserved_hours=72), used_ratio=0.1)
    min_qo = store.min_queue_offset("Orders", 0)
    cq = store.consume_queue("Orders", 0)
    assert cq is not None and cq.queue.files[0].file_base < min_qo * 20  # its first file kept expired entries
    store.close()
    create_abort(tmp_path / "s", os.getpid())  # as a crash leaves it
    with MessageStore.open(tmp_path / "s", now_ms=clock) as reopened:
        assert reopened.min_queue_offset("Orders", 0) == min_qo
        assert reopened.max_queue_offset("Orders", 0) == 120
        assert reopened.get("Orders", 0, 119).messages[0].phys_offset == results[-1].phys_offset
    assert verify_store(tmp_path / "s").ok


def test_young_files_stay_outside_the_delete_hour_unless_the_disk_is_full(tmp_path: Path) -> None:
    clock = FakeClock(_local_ms(13))
    with MessageStore.open(tmp_path / "s", StoreConfig(geometry=GEOMETRY), now_ms=clock) as store:
        store.put_batch([Message("Orders", bytes(300)) for _ in range(120)])
        count = len(store.commitlog.queue.files)
        assert not store.clean_expired(RetentionPolicy(), used_ratio=0.5).delete
        assert len(store.commitlog.queue.files) == count
        assert not store.clean_expired(RetentionPolicy(), used_ratio=0.8).clean_immediately
        assert len(store.commitlog.queue.files) == count  # past 75 %, but nothing is old enough
        forced = store.clean_expired(RetentionPolicy(delete_file_batch_max=2), used_ratio=0.87)
        assert forced.clean_immediately and len(store.commitlog.queue.files) == count - 2
        assert store.put(Message("Orders", b"after")).ok


def test_one_watermark_rule_for_every_veto_and_one_expiry_for_deletion_and_status(tmp_path: Path) -> None:
    """A file ending at the watermark may go, one byte past it stays; the veto keeps every file after
    the first kept one; a file expires file_reserved_hours after its last write, as deletion decides."""
    clock = FakeClock(_local_ms(13))
    store = MessageStore.open(tmp_path / "s", StoreConfig(geometry=GEOMETRY), now_ms=clock)
    store.put_batch([Message("Orders", bytes(300)) for _ in range(120)])
    files = store.commitlog.queue.files
    assert len(files) >= 5
    second_end = files[1].file_end
    assert [ends_by(second_end)(mf) for mf in files[:3]] == [True, True, False]
    assert not ends_by(second_end - 1)(files[1])
    policy = RetentionPolicy(file_reserved_hours=2)
    for mf in files:
        _age(mf.path, clock.now - 3 * HOUR_MS)
    _age(files[3].path, clock.now)
    assert policy.expires_ms(files[0]) == files[0].last_modified_ms() + 2 * HOUR_MS <= clock.now
    assert policy.expires_ms(files[3]) > clock.now
    # past the forcible ratio every file but the newest could go: the veto stops at the first it keeps
    veto = decide(RetentionPolicy(), 0.95, clock.now)
    assert delete_expired_commitlog(store.commitlog, policy, veto, clock.now, ends_by(second_end)) == 2
    assert store.commitlog.min_offset == second_end
    assert delete_consumed_commitlog(store.commitlog, policy, second_end) == 0  # nothing below it is left
    store.close()
