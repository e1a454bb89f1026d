"""Promotion of a stopped slave's store: its torn tail cut, a new epoch at the end of its last whole
record, the promotion recorded, and a later start as a slave refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore.engine import Message, MessageStore, StoreConfig
from mqstore.engine.ha.epochs import EpochEntry, EpochFile
from mqstore.engine.ha.promotion import RoleFileError, StoredRole, check_start_role, promote_store, read_role
from mqstore.engine.ha.replica import append_replica
from mqstore.engine.log.commitlog import CommitLog
from tests.conftest import TINY, FakeClock


def slave_with_torn_tail(tmp_path: Path) -> tuple[Path, int, int]:
    """A slave's store holding a master's records and half of the next one, as a cut transfer leaves
    it; with the epoch it followed. Returns it, the end of its last whole record and the torn end."""
    clock = FakeClock()
    with MessageStore.open(tmp_path / "master", StoreConfig(geometry=TINY), now_ms=clock) as master:
        for i in range(12):
            clock.advance(1)
            master.put(Message("Orders", b"x" * (40 + i)), queue_id=i % 2)
        whole = master.commitlog.max_offset
        clock.advance(1)
        master.put(Message("Orders", b"y" * 300), queue_id=0)
        source = master.commitlog.file_for(0)
        assert source is not None
        torn = whole + 100
        data = source.read(0, torn)
    slave = tmp_path / "slave"
    (slave / "commitlog").mkdir(parents=True)
    (slave / "config").mkdir()
    geometry = tmp_path / "master" / "config" / "storeGeometry.json"  # the master's, as a slave is set up
    (slave / "config" / geometry.name).write_bytes(geometry.read_bytes())
    replica = CommitLog.open(slave / "commitlog", TINY.commitlog_file_size)
    try:
        assert append_replica(replica, 0, data) == torn
        replica.flush()
    finally:
        replica.close()
    EpochFile.load(slave).append(1, 0)
    return slave, whole, torn


def test_promotion_cuts_the_torn_tail_and_opens_the_next_epoch_at_the_last_whole_record(tmp_path: Path) -> None:
    slave, whole, torn = slave_with_torn_tail(tmp_path)
    stored = promote_store(slave, TINY, "SYNC_MASTER", 1234)
    assert stored == StoredRole("SYNC_MASTER", 2, whole, 1234)
    assert EpochFile.load(slave).entries == (EpochEntry(1, 0), EpochEntry(2, whole))
    assert json.loads((slave / "config" / "role.json").read_bytes())["epoch"] == 2
    assert read_role(slave) == stored
    commitlog = CommitLog.open(slave / "commitlog", TINY.commitlog_file_size)
    try:  # the half record is gone from the file, not only from the position: no stale bytes past the cut
        mf = commitlog.file_for(0)
        assert mf is not None and bytes(mf.read(whole, torn - whole)) == bytes(torn - whole)
    finally:
        commitlog.close()
    with MessageStore.open(slave, StoreConfig(geometry=TINY)) as store:  # opens as any store, ends at the cut
        assert store.commitlog.max_offset == whole


def test_a_promoted_store_refuses_to_start_as_a_slave(tmp_path: Path) -> None:
    slave, _, _ = slave_with_torn_tail(tmp_path)
    assert check_start_role(slave, starts_as_slave=True) is None  # never promoted: a slave may start
    promote_store(slave, TINY, "ASYNC_MASTER", 1)
    assert check_start_role(slave, starts_as_slave=False) is not None
    with pytest.raises(RoleFileError, match=r"promoted to ASYNC_MASTER .* remove .*role\.json"):
        check_start_role(slave, starts_as_slave=True)


def test_promoting_twice_opens_a_new_epoch_each_time(tmp_path: Path) -> None:
    slave, whole, _ = slave_with_torn_tail(tmp_path)
    promote_store(slave, TINY, "ASYNC_MASTER", 1)
    assert promote_store(slave, TINY, "ASYNC_MASTER", 2).epoch == 3
    assert [e.epoch for e in EpochFile.load(slave).entries] == [1, 2, 3]
    assert EpochFile.load(slave).last == EpochEntry(3, whole)
