"""mqstore.scripts.harness: the broker-run harness every benchmark, survival harness and integration test
starts its brokers with."""

from __future__ import annotations

import socket
from pathlib import Path

import psutil
import pytest

from mqstore.scripts.harness import Broker, BrokerProcess, free_port_range, wait_for

TINY_GEOMETRY = "[store.geometry]\ncommitlog_file_size = 65536\ncq_entries_per_file = 64\n"


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # dead, not yet reaped by its new parent
    except psutil.NoSuchProcess:
        return True


def test_wait_for_returns_the_value_or_fails_naming_what_it_waited_for() -> None:
    calls = iter([None, 0, "there"])
    assert wait_for(lambda: next(calls), 5, "a value") == "there"
    with pytest.raises(AssertionError, match="waiting for the impossible"):
        wait_for(lambda: None, 0.05, "the impossible")


def test_free_port_range_can_be_bound() -> None:
    base = free_port_range(3)
    socks = [socket.socket() for _ in range(3)]
    try:
        for i, s in enumerate(socks):
            s.bind(("127.0.0.1", base + i))
    finally:
        for s in socks:
            s.close()


def test_a_broker_that_exits_fails_its_start_with_its_log(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "store", "--flush", "NO_SUCH_MODE", log_path=tmp_path / "broker.log")
    with pytest.raises(AssertionError, match="broker exited with 2") as failed:
        broker.start()
    assert "NO_SUCH_MODE" in str(failed.value)  # argparse's complaint, from the log
    assert broker.stop() == 2


def test_broker_process_runs_with_its_arguments_and_config_then_stops_in_order(tmp_path: Path) -> None:
    config = tmp_path / "geometry.toml"
    config.write_text(TINY_GEOMETRY)
    broker = BrokerProcess(tmp_path / "store", "--readers", "2", "--remoting", "off", config=config).start()
    try:
        status = broker.status()
        assert status is not None and status["ready"]
        assert {"reader-0", "reader-1"} <= set(status["actors"])
        assert broker.logs() == ""  # no log asked for: the output is discarded
    finally:
        assert broker.stop() == 0
    assert broker.status() is None and broker.stop() == 0  # stopped: nobody answers, stopping again is a no-op


def test_killed_tree_takes_its_actors_along_and_starts_again(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker:
        assert broker.proc is not None
        actors = [broker.pid_of(name) for name in ("writer", "reader-0")]
        broker.kill_tree()
        assert broker.proc is None and all(_gone(pid) for pid in actors)
        broker.start()
        assert broker.pid_of("writer") not in actors
        assert broker.stop() == 0
