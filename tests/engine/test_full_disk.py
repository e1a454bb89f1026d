"""A full disk, for real: the store on a small tmpfs. Sends fail with a status and a reason, nothing
acknowledged is lost, and writing resumes once space returns."""

from __future__ import annotations

import os
from pathlib import Path

from mqstore.engine import Geometry, Message, MessageStore, PutResult, PutStatus, StoreConfig
from mqstore.engine.repair.verify import verify_store
from tests.conftest import FakeClock

GEOMETRY = Geometry(commitlog_file_size=64 * 1024, cq_entries_per_file=64, index_slot_count=16,
                    index_entry_count=256)


def _fill(store: MessageStore, start: int) -> tuple[list[PutResult], PutResult]:
    acked: list[PutResult] = []
    for i in range(start, start + 100_000):
        r = store.put(Message("Orders", os.urandom(900), keys=[f"k{i}"]), queue_id=i % 2)
        if not r.ok:
            return acked, r
        acked.append(r)
    raise AssertionError("the disk never filled up")


def test_full_disk_refuses_then_resumes(small_disk: Path, clock: FakeClock) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(bytes(128 * 1024))
    store = MessageStore.open(small_disk / "store", StoreConfig(geometry=GEOMETRY), now_ms=clock)
    acked, refused = _fill(store, 0)
    assert refused.status in (PutStatus.CREATE_MAPPED_FILE_FAILED, PutStatus.SERVICE_NOT_AVAILABLE)
    assert "No space left" in refused.reason
    for r in acked:  # everything acknowledged is still readable while the disk is full
        got = store.get("Orders", r.queue_id, r.queue_offset, max_count=1)
        assert got.messages and got.messages[0].phys_offset == r.phys_offset
    assert not store.put(Message("Orders", b"still full")).ok

    ballast.unlink()  # space returns, and writing resumes by itself
    more = [store.put(Message("Orders", os.urandom(900), keys=[f"more{i}"]), queue_id=i % 2) for i in range(20)]
    assert all(r.ok for r in more), more
    assert more[0].phys_offset >= acked[-1].phys_offset
    store.close()
    with MessageStore.open(small_disk / "store", now_ms=clock) as reopened:
        for r in acked + more:
            got = reopened.get("Orders", r.queue_id, r.queue_offset, max_count=1)
            assert got.messages[0].phys_offset == r.phys_offset
    assert verify_store(small_disk / "store").ok
