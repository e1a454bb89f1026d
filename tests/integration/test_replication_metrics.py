"""Replication as the operator sees it, on a real master and slave (separate stores, the HA port on
loopback, the metrics listener on for both): the master's ``/metrics`` and ``/api/status`` show the
slave's acknowledged offset and its lag, in bytes and seconds, grow while the slave's HA actor is
stopped and go back to 0 once it catches up; the slave's own metrics and ``mqstore status`` show its
role, its state and its master; the master's dashboard draws the slave's row."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser
from prometheus_client.parser import text_string_to_metric_families

from mqstore.ipc.client.api import Producer
from tests.integration.broker import Broker, free_port_range, wait_for
from tests.integration.test_dashboard import _cells, browser

__all__ = ["browser"]  # the dashboard test's Chromium, for this module's page

TOPIC = "Watched"


def _get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        body: bytes = response.read()
        return body


def _samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = _get(port, "/metrics").decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _slave_seen_by_master(port: int) -> dict[str, Any] | None:
    """The slave's row in the master's ``/api/status`` (broker id 1), with the master's written end."""
    rep = json.loads(_get(port, "/api/status")).get("replication") or {}
    rows = [s for s in rep.get("slaves", ()) if s["broker_id"] == 1]
    return {**rows[0], "written": rep["written"]} if rows else None


def _send(master: Broker, count: int) -> int:
    with Producer(master.store) as producer:
        results = [producer.send(TOPIC, b"x" * 500, queue_id=0) for _ in range(count)]
    assert all(r.ok for r in results)
    return results[-1].phys_offset


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Broker, Broker, int, int, int]]:
    ha_port, master_metrics, slave_metrics = free_port_range(1), free_port_range(1), free_port_range(1)
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    # nothing read from a stopped slave for two minutes before the master drops it: the lag is seen first
    master = Broker(tmp_path / "m", metrics_port=master_metrics,
                    extra_toml=f"\n[ha]\nserve = true\nlisten_port = {ha_port}\nhousekeeping_interval_ms = 120000\n")
    slave = Broker(tmp_path / "s", metrics_port=slave_metrics)
    slave.start_args += ("--role", "SLAVE", "--broker-id", "1", "--master", f"127.0.0.1:{ha_port}")
    with master, slave:
        yield master, slave, ha_port, master_metrics, slave_metrics


@pytest.mark.slow
def test_a_slaves_lag_shows_in_bytes_and_seconds_and_goes_to_zero_once_it_catches_up(
        pair: tuple[Broker, Broker, int, int, int], browser: Browser) -> None:
    master, slave, ha_port, master_metrics, slave_metrics = pair
    _send(master, 20)
    caught_up = wait_for(lambda: (row := _slave_seen_by_master(master_metrics)) is not None
                         and row["written"] > 0 and row["acked"] == row["written"] and row["lag_ms"] == 0 and row,
                         60, "the slave to catch up in the master's /api/status")
    assert caught_up["lag_bytes"] == 0 and caught_up["address"].startswith("127.0.0.1:")

    ha_pid = slave.pid_of("ha")
    os.kill(ha_pid, signal.SIGSTOP)
    try:
        last = _send(master, 20)
        behind = wait_for(lambda: (row := _slave_seen_by_master(master_metrics)) is not None
                          and row["written"] > last and row["lag_bytes"] > 0 and row["lag_ms"] > 0 and row,
                          60, "the stopped slave's lag in the master's /api/status")
        assert behind["lag_bytes"] == behind["written"] - behind["acked"]
        lagging = wait_for(lambda: (got := _samples(master_metrics)).get(
            ("mqstore_ha_slave_lag_seconds", (("broker_id", "1"),)), 0) > 0 and got, 30,
            "the stopped slave's lag in the master's /metrics")
        assert lagging[("mqstore_ha_slave_lag_bytes", (("broker_id", "1"),))] > 0
        assert lagging[("mqstore_ha_slaves_connected", ())] == 1
    finally:
        os.kill(ha_pid, signal.SIGCONT)

    def back_to_zero() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        got = _samples(master_metrics)
        slave_1 = (("broker_id", "1"),)
        done = (got.get(("mqstore_ha_slave_lag_bytes", slave_1)) == 0
                and got.get(("mqstore_ha_slave_lag_seconds", slave_1)) == 0
                and got.get(("mqstore_ha_slave_acked_offset", slave_1)) == got[("mqstore_commitlog_written_offset",
                                                                                ())] > last)
        return got if done else None

    got = wait_for(back_to_zero, 60, "the slave's lag to go back to 0 in the master's /metrics")
    assert got[("mqstore_ha_role", (("role", "ASYNC_MASTER"),))] == 1
    assert got[("mqstore_ha_slaves_in_sync", ())] == 1 and got[("mqstore_ha_epoch", ())] >= 1
    wait_for(lambda: (row := _slave_seen_by_master(master_metrics)) is not None and row["lag_bytes"] == 0
             and row["lag_ms"] == 0, 30, "the slave's lag to go back to 0 in the master's /api/status")

    # the slave: its own metrics, and mqstore status
    written = int(got[("mqstore_commitlog_written_offset", ())])
    seen = wait_for(lambda: (s := _samples(slave_metrics)).get(("mqstore_ha_master_offset", ()), 0) >= written
                    and s, 30, "the slave's metrics to show the master's end")
    assert seen[("mqstore_ha_role", (("role", "SLAVE"),))] == 1
    assert seen[("mqstore_ha_slave_state", (("state", "transfer"),))] == 1
    text = slave.mqstore("status").stdout
    assert f"replication: SLAVE of 127.0.0.1:{ha_port}, epoch 1, transfer" in text, text
    shown = json.loads(slave.mqstore("status", "--json").stdout)["replication"]
    assert (shown["role"], shown["master"], shown["state"]) == ("SLAVE", f"127.0.0.1:{ha_port}", "transfer")

    # the master's dashboard: its role and the slave's row, lag 0
    page = browser.new_page()
    try:
        page.goto(f"http://127.0.0.1:{master_metrics}/")
        wait_for(lambda: page.get_attribute("#replication", "data-role") == "ASYNC_MASTER"
                 and [r["cells"][3:5] for r in _cells(page, "slaves") if r["data"].get("brokerId") == "1"]
                 == [["0", "0.0"]], 30, "the dashboard to show the slave caught up")
        assert "ASYNC_MASTER, epoch 1" in (page.text_content("#replication-text") or "")
    finally:
        page.close()
