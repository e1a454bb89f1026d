"""SYNC_MASTER waiters: an answer waits for a ``replicated`` notice whose end covers its send, beside the
flush's wait (either may finish first), and is FLUSH_SLAVE_TIMEOUT past the slave timeout,
SLAVE_NOT_AVAILABLE at once when too few slaves are in sync or the HA actor has said nothing lately;
never PUT_OK for a send the notice's end falls short of. The clock is the test's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore.actors.config import load_config
from mqstore.actors.writer import sync
from mqstore.actors.writer.outlets import OWN_PEER
from mqstore.actors.writer.sync import STALE_HEARTBEATS, ReplicaWait, SyncWaiters
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Flushed, Replicated
from mqstore.ipc.wire.replies import SendEncodedReply, SendReply
from tests.actors.writer.test_sync import Socket, _dispatch, _outlets

FLUSH_MS = 5_000
SLAVE_MS = 3_000
HEARTBEAT_MS = 1_000
RULE = ReplicaWait(slaves=1, timeout_ms=SLAVE_MS, stale_ms=STALE_HEARTBEATS * HEARTBEAT_MS)


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(sync, "monotonic_ms", fake)
    return fake


def _replicated(waiters: SyncWaiters, end: int, in_sync: int = 1, connected: int = 1, epoch: int = 1) -> None:
    waiters.on_replicated(Socket([[schema.REPLICATED, Replicated(end, in_sync, connected, epoch).encode()]]))  # type: ignore[arg-type]


def _flushed(waiters: SyncWaiters, end: int) -> None:
    waiters.on_flushed(Socket([[schema.FLUSHED, Flushed(end).encode()]]))  # type: ignore[arg-type]


def _answers(log: list[tuple[str, Any]]) -> list[tuple[bytes, Any]]:
    """(identity, results or written_status) of every reply sent."""
    out = []
    for name, frames in log:
        if name == "reply":
            reply = schema.unpack(frames[1])
            out.append((frames[0], reply.get("written_status", reply["results"])))
    return out


def _ok(status: str = "PUT_OK") -> SendReply:
    return SendReply([{"status": status, "queue": 0}])


def test_an_answer_waits_until_a_replicated_notice_reaches_its_end(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 0)
    waiters.hold(100, b"a", 1, _ok(), flush=False)
    waiters.hold(200, b"b", 2, _ok(), flush=False)
    assert len(waiters) == 2 and not waiters.flush_wanted  # no flush asked for under ASYNC_FLUSH
    waiters.release(outlets)
    assert log == []
    _replicated(waiters, 150)
    waiters.release(outlets)
    assert _answers(log) == [(b"a", [{"status": "PUT_OK", "queue": 0}])] and len(waiters) == 1
    _replicated(waiters, 200)
    waiters.release(outlets)
    assert [identity for identity, _ in _answers(log)] == [b"a", b"b"] and len(waiters) == 0


def test_a_notice_just_short_of_the_end_leaves_the_answer_until_the_slave_timeout(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 0)
    waiters.hold(100, b"a", 1, _ok(), flush=False)
    for _ in range(3):
        _replicated(waiters, 99)  # heartbeats, none covering the last byte
        clock.now_ms += SLAVE_MS // 3 - 1
        waiters.release(outlets)
        assert log == []
    clock.now_ms += 3
    waiters.release(outlets)
    assert _answers(log) == [(b"a", [{"status": "FLUSH_SLAVE_TIMEOUT", "queue": 0}])]
    assert waiters.answered_as == {"FLUSH_SLAVE_TIMEOUT": 1} and len(waiters) == 0


@pytest.mark.parametrize("flush_first", [True, False])
def test_under_sync_flush_the_answer_goes_once_both_waits_are_done_in_either_order(clock: Clock,
                                                                                   flush_first: bool) -> None:
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 0)
    waiters.hold(100, b"a", 1, SendEncodedReply(b"rows", "PUT_OK", ""))
    waiters.hold_dispatch(_dispatch(0, 100))
    assert waiters.flush_wanted
    first, second = (_flushed, _replicated) if flush_first else (_replicated, _flushed)
    first(waiters, 100)
    waiters.release(outlets)
    assert log == [] and _answers(log) == []  # the builders wait for both too: visible once copied and durable
    second(waiters, 100)
    waiters.release(outlets)
    assert [name for name, _ in log] == ["dispatch", "reply"] and progress.dispatched_end == 100
    assert _answers(log) == [(b"a", "PUT_OK")] and len(waiters) == 0


def test_the_waits_run_side_by_side_not_one_after_the_other(clock: Clock) -> None:
    """A flush that comes late does not give the copies a later deadline: each wait has its own."""
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 0)
    waiters.hold(100, b"a", 1, _ok())
    clock.now_ms += SLAVE_MS  # the copies' deadline, the flush not come yet
    waiters.release(outlets)
    assert log == [] and len(waiters.for_replicas) == 0 and len(waiters.for_flush) == 1
    _flushed(waiters, 100)
    waiters.release(outlets)
    assert _answers(log) == [(b"a", [{"status": "FLUSH_SLAVE_TIMEOUT", "queue": 0}])]


@pytest.mark.parametrize(("flushed", "replicated", "status"), [
    (0, 100, "FLUSH_DISK_TIMEOUT"), (100, 0, "FLUSH_SLAVE_TIMEOUT"), (0, 0, "FLUSH_SLAVE_TIMEOUT")])
def test_a_failed_replica_wait_overwrites_a_failed_flush(clock: Clock, flushed: int, replicated: int,
                                                         status: str) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 0)
    waiters.hold(100, b"a", 1, _ok())
    _flushed(waiters, flushed)
    _replicated(waiters, replicated)
    clock.now_ms += max(FLUSH_MS, SLAVE_MS)
    waiters.release(outlets)
    assert _answers(log) == [(b"a", [{"status": status, "queue": 0}])]


def test_too_few_slaves_in_sync_is_slave_not_available_at_once(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, ReplicaWait(2, SLAVE_MS, RULE.stale_ms))  # in_sync_replicas = 3
    _replicated(waiters, 0, in_sync=1, connected=2)
    waiters.hold(100, b"a", 1, _ok(), flush=False)
    waiters.hold(100, b"b", 2, SendEncodedReply(b"rows", "PUT_OK", ""), flush=False)
    waiters.release(outlets)
    assert _answers(log) == [(b"a", [{"status": "SLAVE_NOT_AVAILABLE", "queue": 0}]), (b"b", "SLAVE_NOT_AVAILABLE")]
    assert waiters.answered_as == {"SLAVE_NOT_AVAILABLE": 2} and len(waiters) == 0
    _replicated(waiters, 100, in_sync=2, connected=2)  # the next send waits for them again
    waiters.hold(200, b"c", 3, _ok(), flush=False)
    waiters.release(outlets)
    assert len(_answers(log)) == 2 and len(waiters) == 1


def test_slave_not_available_still_waits_for_the_flush_and_keeps_its_status(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 0, in_sync=0, connected=1)  # connected, too far behind
    waiters.hold(100, b"a", 1, _ok())
    waiters.hold(300, b"b", 2, _ok())
    waiters.release(outlets)
    assert log == []
    _flushed(waiters, 100)
    waiters.release(outlets)
    assert _answers(log) == [(b"a", [{"status": "SLAVE_NOT_AVAILABLE", "queue": 0}])]
    clock.now_ms += FLUSH_MS  # a flush timeout does not hide that no slave was waited for
    waiters.release(outlets)
    assert _answers(log)[1] == (b"b", [{"status": "SLAVE_NOT_AVAILABLE", "queue": 0}])


def test_a_stale_or_missing_notice_counts_as_no_slave_in_sync(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    waiters.hold(100, b"never", 1, _ok(), flush=False)  # no HA actor has ever spoken
    _replicated(waiters, 0, in_sync=1)
    clock.now_ms += RULE.stale_ms
    waiters.hold(100, b"fresh", 2, _ok(), flush=False)  # heard just within three heartbeats
    clock.now_ms += 1
    waiters.hold(100, b"stale", 3, _ok(), flush=False)  # the HA actor went quiet
    waiters.release(outlets)
    assert [(i, r[0]["status"]) for i, r in _answers(log)] == [(b"never", "SLAVE_NOT_AVAILABLE"),
                                                                 (b"stale", "SLAVE_NOT_AVAILABLE")]
    assert len(waiters) == 1
    _replicated(waiters, 100)  # the old notice's end still counts once heard again
    waiters.release(outlets)
    assert _answers(log)[2] == (b"fresh", [{"status": "PUT_OK", "queue": 0}])


def test_a_notice_that_says_less_is_believed(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 50)
    waiters.hold(100, b"a", 1, _ok(), flush=False)
    waiters.on_replicated(Socket([[schema.REPLICATED, Replicated(100, 1, 1, 1).encode()],  # type: ignore[arg-type]
                                  [schema.REPLICATED, b"\xc1"],
                                  [schema.REPLICATED, Replicated(60, 1, 1, 2).encode()]]))
    waiters.release(outlets)
    assert log == [] and waiters.replicated_end == 60  # the last word, not the largest


def test_the_brokers_own_sends_wait_for_the_flush_alone(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 0)
    waiters.hold(100, OWN_PEER + b"s", 1, _ok(), flush=False)
    waiters.release(outlets)
    assert _answers(log) == [(OWN_PEER + b"s", [{"status": "PUT_OK", "queue": 0}])] and len(waiters) == 0


def test_only_a_sync_master_needing_a_slave_waits(tmp_path: Path) -> None:
    def rule(role: str, **ha: Any) -> ReplicaWait | None:
        return ReplicaWait.of(load_config(tmp_path, None, broker={"role": role}, ha=ha))

    assert rule("ASYNC_MASTER") is None and rule("ASYNC_MASTER", serve=True) is None
    assert rule("SYNC_MASTER", in_sync_replicas=1) is None  # RocketMQ's default: waits for nobody
    assert rule("SYNC_MASTER") == ReplicaWait(1, 3_000, STALE_HEARTBEATS * 5_000)  # mqstore's default: 2 copies
    assert rule("SYNC_MASTER", in_sync_replicas=3, slave_timeout_ms=500, heartbeat_interval_ms=100) == \
        ReplicaWait(2, 500, 300)


def test_drain_on_stop_waits_for_the_copies_within_the_slave_timeout(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, _ = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 0)
    waiters.hold(100, b"a", 1, _ok(), flush=False)
    replicated_in: Any = Socket([[schema.REPLICATED, Replicated(100, 1, 1, 1).encode()]])
    waiters.drain(outlets, Socket(), replicated_in)  # type: ignore[arg-type]
    assert _answers(log) == [(b"a", [{"status": "PUT_OK", "queue": 0}])]


def test_stats_report_the_waits_and_the_last_notice(clock: Clock) -> None:
    waiters = SyncWaiters(FLUSH_MS, RULE)
    assert waiters.stats(clock.now_ms)["replicated"] is None
    _replicated(waiters, 10, in_sync=1, connected=2, epoch=3)
    waiters.hold(100, b"a", 1, _ok())
    clock.now_ms += 40
    assert waiters.stats(clock.now_ms) == {
        "pending_flush": 1, "pending_replicas": 1, "answered_as": {},
        "replicated": {"end": 10, "in_sync": 1, "connected": 2, "epoch": 3, "age_ms": 40}}
    assert "replicated" not in SyncWaiters(FLUSH_MS).stats(clock.now_ms)


def test_a_sync_masters_batch_is_visible_only_once_its_copies_hold_it(clock: Clock) -> None:
    """Regression: a SYNC_MASTER published each batch to the builders at once, so a group could read a
    record only the master held; after a failover the promoted slave gave that queue offset to the next
    SEND_OK, which the group, its offset past it, never read."""
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE, sync_flush=False)
    _replicated(waiters, 0)
    waiters.hold(100, b"a", 1, _ok(), flush=False)
    waiters.hold_dispatch(_dispatch(0, 100))
    waiters.release(outlets)
    assert log == [] and progress.dispatched_end == 0
    _replicated(waiters, 100)
    waiters.release(outlets)
    assert [name for name, _ in log] == ["dispatch", "reply"] and progress.dispatched_end == 100


def test_a_sync_masters_batch_goes_without_copies_when_no_slave_is_in_sync_or_its_timeout_passed(
        clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE, sync_flush=False)
    _replicated(waiters, 0, in_sync=0)  # the master's copy is the only one there is
    waiters.hold_dispatch(_dispatch(0, 100))
    waiters.release(outlets)
    assert progress.dispatched_end == 100
    _replicated(waiters, 100, in_sync=1)
    waiters.hold_dispatch(_dispatch(100, 200))  # a slave in sync, stuck: its copy never comes
    clock.now_ms += SLAVE_MS - 1
    waiters.release(outlets)
    assert progress.dispatched_end == 100
    clock.now_ms += 1
    waiters.release(outlets)
    assert progress.dispatched_end == 200


def test_under_sync_flush_a_sync_masters_batch_waits_for_its_flush_past_its_slave_timeout(clock: Clock) -> None:
    log: list[tuple[str, Any]] = []
    outlets, progress = _outlets(log)
    waiters = SyncWaiters(FLUSH_MS, RULE)
    _replicated(waiters, 100)
    waiters.hold_dispatch(_dispatch(0, 100))
    clock.now_ms += SLAVE_MS
    waiters.release(outlets)
    assert progress.dispatched_end == 0  # copied, its slave timeout past, but not flushed
    _flushed(waiters, 100)
    waiters.release(outlets)
    assert progress.dispatched_end == 100
