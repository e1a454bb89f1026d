"""The transactions actor stops at once, whatever its peers do: a supervisor SIGKILLed stops every actor
together, and a check run that began, or went on, after the stop waited out a call to a reader already
gone (5 s an actor of the tree stayed past its supervisor)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.transactions import actor as actor_module
from mqstore.actors.transactions import broker as broker_module
from mqstore.actors.transactions.actor import TransactionsActor
from mqstore.actors.transactions.broker import BrokerCalls
from mqstore.actors.transactions.checker import CheckRun
from mqstore.engine.log.host import Host
from mqstore.engine.put import transactions as tx
from mqstore.ipc.transport.channel import BrokerTimeoutError, Channel


@pytest.fixture
def run_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="mq")  # short: ipc socket paths are limited in length
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_no_check_run_begins_once_the_actor_stops(tmp_path: Path, run_dir: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(tmp_path / "store", None, ipc={"run_dir": run_dir})
    config.endpoints.prepare()
    runtime = Runtime("transactions", config, zmq.Context())
    actor = TransactionsActor(runtime)
    now_ms = [0]
    monkeypatch.setattr(actor_module, "monotonic_ms", lambda: now_ms[0])
    runs: list[int] = []
    monkeypatch.setattr(actor.checker, "run", lambda: runs.append(now_ms[0]) or CheckRun())

    def stopped_as_the_run_came_due(poller: zmq.Poller, timeout_ms: int) -> dict[Any, int]:
        now_ms[0] += config.broker.transaction_check_interval_ms  # the check run is due ...
        runtime.request_stop()  # ... and the supervisor is gone: every actor stops
        return {}

    monkeypatch.setattr(runtime, "poll", stopped_as_the_run_came_due)
    try:
        actor.run()
    finally:
        runtime.close()
    assert runs == []


def test_a_check_call_waiting_gives_up_once_the_actor_stops(run_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_module, "CALL_TIMEOUT_MS", 2_000)  # a wait not cut short ends here, "no reply"
    channel = Channel({"reader": [f"ipc://{run_dir}/gone.sock"]}, name="test-calls")  # a reader that is gone
    stopping = [False]
    calls = BrokerCalls(channel, Host("127.0.0.1", 10911), tx.CHECK_GROUP, lambda: stopping[0])
    try:
        with pytest.raises(BrokerTimeoutError, match="no reply"):
            calls.span(tx.HALF_TOPIC)  # not stopping: the call's own timeout
        stopping[0] = True
        with pytest.raises(BrokerTimeoutError, match="stopping"):
            calls.span(tx.HALF_TOPIC)
    finally:
        channel.close()
