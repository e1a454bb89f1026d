"""RocketMQ's store test scenarios (reference §11) not covered next to the module they exercise.

Where each of the others lives: 1-2 keyindex/test_index_file, 3 keyindex/test_service, 4
test_checkpoint, 5-11 log/test_mapped_file_queue, 12 log/test_mapped_file, 13-14 log/test_commitlog,
15 log/test_record, 17/20/21 consumequeue/test_consume_queue, 23/24/25/27/29/31 test_store, 30
test_recovery. Not applicable yet: 18/19/22
(LMQ multi-dispatch and the consume-queue ext file are not implemented), 32 (reput under SYNC_FLUSH:
the actor engine), 33 (cleanup of expired files: retention).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.engine import Host, Message, MessageStore, StoreConfig
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.meta.metafile import abort_exists
from tests.conftest import TINY, FakeClock

OpenStore = Callable[..., MessageStore]


def test_batch_put_ipv6_born_and_store_hosts(tmp_path: Path, clock: FakeClock) -> None:
    """§11.16 BatchPutMessageTest.testPutIPv6HostMessages: both hosts IPv6 round-trip, msg ids are 56 chars."""
    config = StoreConfig(geometry=TINY, store_host=Host("fe80::1", 10911))
    with MessageStore.open(tmp_path / "s", config, now_ms=clock) as store:
        results = store.put_batch([Message("Orders", f"{i}".encode(), born_host=Host("::2", 5000 + i))
                                   for i in range(8)])
        assert [r.queue_offset for r in results] == list(range(8))
        for i, r in enumerate(results):
            assert len(r.msg_id) == 56
            m = store.view_by_id(r.msg_id)
            assert m is not None and m.body == f"{i}".encode()
            assert (m.born_host, m.store_host) == (Host("::2", 5000 + i), Host("fe80::1", 10911))
            assert m.sys_flag & 0x30 == 0x30


def test_store_time_of_a_queue_entry(open_store: OpenStore, clock: FakeClock) -> None:
    """§11.26 testGetStoreTime: a unit's store time is its record's; outside the log it is -1."""
    store = open_store()
    r = store.put(Message("Orders", b"x"))
    cq = store.consume_queue("Orders", 0)
    assert cq is not None and cq.entry(0) is not None
    phys_offset, _, _ = cq.entry(0)  # type: ignore[misc]
    assert store.commitlog.store_ms_at(phys_offset) == clock.now
    assert store.commitlog.store_ms_at(store.commitlog.max_offset + 100) == -1
    assert cq.entry(5) is None and r.phys_offset == phys_offset


def test_max_offset_counts_dispatched_messages(open_store: OpenStore) -> None:
    """§11.28 testMaxOffset: the embedded store dispatches synchronously, so what was put is what
    the queue holds."""
    store = open_store()
    store.put_batch([Message("Orders", b"x")] * 7)
    assert store.max_queue_offset("Orders", 0) == 7 and store.dispatch_behind_bytes == 0


def test_dispatch_behind_at_shutdown_keeps_the_abort_file(tmp_path: Path, clock: FakeClock,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """§11.34 testDispatchBehindWhenShutdown: derived files behind at close keep the abort marker,
    and the next open (abnormal) dispatches what they lacked."""
    store = MessageStore.open(tmp_path / "s", StoreConfig(geometry=TINY), now_ms=clock)
    store.put(Message("Orders", b"before", keys=["a"]))

    def no_space(*args: object, **kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(IndexService, "build", no_space)
    monkeypatch.setattr(IndexService, "build_hashed", no_space)  # the catch-up indexes hashed keys a batch at a time
    acked = store.put(Message("Orders", b"behind", keys=["b"]))
    assert acked.ok and store.dispatch_behind_bytes > 0
    refused = store.put(Message("Orders", b"refused"))
    assert not refused.ok and "cannot be written" in refused.reason
    store.close()
    assert abort_exists(tmp_path / "s")
    monkeypatch.undo()
    with MessageStore.open(tmp_path / "s", now_ms=clock) as reopened:
        assert reopened.recovery.abnormal
        assert [m.body for m in reopened.query_by_key("Orders", "b")] == [b"behind"]
        assert reopened.get("Orders", 0, 1).messages[0].body == b"behind"
    assert not abort_exists(tmp_path / "s")


def test_repeated_restart(tmp_path: Path, clock: FakeClock) -> None:
    """§11.35 test_repeat_restart: opening and closing the same store again and again is fine."""
    for i in range(5):
        with MessageStore.open(tmp_path / "s", StoreConfig(geometry=TINY), now_ms=clock) as store:
            assert store.put(Message("Orders", f"{i}".encode())).queue_offset == i
            assert not store.recovery.abnormal


def test_max_message_size_is_per_open(tmp_path: Path, clock: FakeClock) -> None:
    """§11.31 testDynamicMaxMessageSize: the body limit is configuration, not geometry."""
    with MessageStore.open(tmp_path / "s", StoreConfig(geometry=TINY, max_body_bytes=100), now_ms=clock) as store:
        assert not store.put(Message("Orders", b"x" * 200)).ok
    with MessageStore.open(tmp_path / "s", StoreConfig(geometry=TINY, max_body_bytes=1000), now_ms=clock) as store:
        assert store.put(Message("Orders", b"x" * 200)).ok
