"""An idle SYNC_MASTER and its caught-up slave sleep: each HA actor wakes for a frame, a notice or a
heartbeat due, not on a fixed short interval (both used to wake ten times a second, the master
publishing ``replicated`` and the slave ``written`` and ``tick`` each time). The main thread of each
HA actor is counted by its voluntary context switches (a poll that slept and woke) over a window of
idleness longer than the writer's staleness rule (three heartbeats with no ``replicated`` notice: no
slave in sync); a send after it is still answered SEND_OK, so the master's heartbeat notices kept the
writer's word fresh."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from mqstore.engine.log.message import PutStatus
from mqstore.ipc.client.api import Producer
from tests.integration.broker import Broker, free_port_range, wait_for
from tests.integration.test_sync_master import slaves_in_sync

HEARTBEAT_MS = 2_000  # the writer's word goes stale after 6 s: the window below is longer
WINDOW_S = 8.0
# in a window, each side: a heartbeat or report each way every 2 s, the master's heartbeat notice to
# the writer, the writer's idle tick (5 s), a report held back by the stats interval: 2 a second at
# most. Ten a second, the old tick, is 80
MAX_WAKEUPS = 16
WINDOWS = 4


def _switches(pid: int) -> int:
    return int(psutil.Process(pid).num_ctx_switches().voluntary)


@pytest.mark.slow
def test_an_idle_master_and_its_caught_up_slave_wake_only_for_heartbeats(tmp_path: Path) -> None:
    ha_port = free_port_range(1)
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    ha = f"\n[ha]\nlisten_port = {ha_port}\nheartbeat_interval_ms = {HEARTBEAT_MS}\n"
    master = Broker(tmp_path / "m", extra_toml=ha, broker_extra='role = "SYNC_MASTER"\nstats_interval_ms = 50')
    slave = Broker(tmp_path / "s", extra_toml=f"\n[ha]\nheartbeat_interval_ms = {HEARTBEAT_MS}\n")
    slave.start_args += ("--role", "SLAVE", "--broker-id", "1", "--master", f"127.0.0.1:{ha_port}")
    with master, slave, Producer(endpoints=master.endpoints(), timeout_ms=60_000) as producer:
        slaves_in_sync(master, 1)
        first = producer.send("Idle", b"before")
        assert first.status is PutStatus.PUT_OK
        wait_for(lambda: int((slave.status() or {}).get("actors", {}).get("ha", {}).get("written", -1))
                 >= first.phys_offset, 60, "the slave to hold the send")
        pids = {"master": master.pid_of("ha"), "slave": slave.pid_of("ha")}
        for _ in range(WINDOWS):  # on a loaded machine the start's rounds can run into the first window
            before = {side: _switches(pid) for side, pid in pids.items()}
            time.sleep(WINDOW_S)  # the window measured, not a wait for a condition
            woke = {side: _switches(pid) - before[side] for side, pid in pids.items()}
            if all(w <= MAX_WAKEUPS for w in woke.values()):
                break
        assert {side: w for side, w in woke.items() if w > MAX_WAKEUPS} == {}, woke
        after = producer.send("Idle", b"after")
        assert after.status is PutStatus.PUT_OK  # not SLAVE_NOT_AVAILABLE: the writer heard the heartbeats
