"""What an actor is handed: a ``Runtime`` a test builds from a configuration and a context, whose
reports reach the supervisor's event socket at most once per interval unless forced, and which
imports no actor (the registry knows them; the runtime is what they are built on)."""

from __future__ import annotations

import ast
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.actor_set import START_ORDER
from mqstore.actors.config import load_config
from mqstore.actors.registry import ACTOR_KINDS, build_actor
from mqstore.actors.runtime import EventReporter, Runtime
from mqstore.actors.supervisor import Supervisor
from mqstore.ipc.transport.sockets import bind
from mqstore.ipc.wire import schema

ROOT = Path(__file__).resolve().parents[2]
EVENTS = "inproc://events"


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    context: zmq.Context[Any] = zmq.Context()
    yield context
    context.destroy(linger=0)


def _received(events: zmq.Socket[Any]) -> list[dict[str, Any]]:
    got = []
    while events.poll(200):
        got.append(schema.unpack(events.recv()))
    return got


def test_reports_reach_the_event_socket_at_most_once_per_interval(ctx: zmq.Context[Any]) -> None:
    events = bind(ctx, zmq.PULL, EVENTS)
    now = [1_000]
    report = EventReporter(ctx, EVENTS, "cqbuilder", 500, clock=lambda: now[0])
    report("running", applied=1)
    report("running", applied=2)                 # within the interval: held
    report("stopped", force=True, applied=3)     # a change of state goes at once
    now[0] += 500
    report("running", applied=4)
    got = _received(events)
    assert [(e["actor"], e["state"], e["applied"]) for e in got] == [
        ("cqbuilder", "running", 1), ("cqbuilder", "stopped", 3), ("cqbuilder", "running", 4)]
    assert all(e["v"] == schema.VERSION and isinstance(e["pid"], int) for e in got)


def test_no_report_reaches_the_supervisor_while_nothing_changes(ctx: zmq.Context[Any]) -> None:
    """An idle actor reports between its rounds as a busy one does; what it says stays the same and
    the supervisor keeps the last stats it got, so the same report goes again only after ``idle_ms``:
    an idle broker's actors do not wake the supervisor once an interval each."""
    events = bind(ctx, zmq.PULL, EVENTS)
    now = [1_000]
    report = EventReporter(ctx, EVENTS, "flusher", 100, clock=lambda: now[0], idle_ms=5_000)
    report("running", flushed=7)
    assert [e["flushed"] for e in _received(events)] == [7]
    for _ in range(49):  # 4.9 s of rounds a 100 ms interval apart, nothing moved
        now[0] += 100
        report("running", flushed=7)
    assert _received(events) == []
    now[0] += 100
    report("running", flushed=7)  # the safety net: the same facts again after idle_ms
    report("running", flushed=8)  # a move within the interval: held
    assert report.held_ms() == 100
    now[0] += 100
    report("running", flushed=8)  # goes once the interval has passed
    assert report.held_ms() is None
    got = _received(events)
    assert [e["flushed"] for e in got] == [7, 8]
    assert report.held_ms() is None


def test_a_report_held_back_goes_when_due_though_the_actor_reports_no_more(tmp_path: Path,
                                                                           ctx: zmq.Context[Any]) -> None:
    """A count that moved just after a report is held by the interval; the actor may then sleep long
    (nothing more to do): its runtime's poll wakes when the held report is due and sends it."""
    run_dir = tempfile.mkdtemp(prefix="mq")  # short: ipc socket paths are limited in length
    endpoint = f"ipc://{run_dir}/events"
    events = bind(ctx, zmq.PULL, endpoint)
    runtime_ctx: zmq.Context[Any] = zmq.Context()
    reporter = EventReporter(runtime_ctx, endpoint, "writer", 200)
    runtime = Runtime("writer", load_config(tmp_path / "store", None), runtime_ctx, reporter)
    poller = zmq.Poller()
    poller.register(runtime.stop_fd, zmq.POLLIN)
    runtime.report("running", written=1)
    runtime.report("running", written=2)  # within the interval: held
    held = reporter.held_ms()
    assert held is not None and 0 < held <= 200
    assert runtime.wait_ms(60_000) <= held
    assert runtime.poll(poller, 60_000) == {}  # returns when the held report is due, not in a minute
    assert reporter.held_ms() is None
    assert [e["written"] for e in _received(events)] == [1, 2]
    assert runtime.wait_ms(60_000) == 60_000  # nothing held: the loop's own deadline
    runtime.close()
    shutil.rmtree(run_dir, ignore_errors=True)


def test_a_runtime_built_for_a_test(tmp_path: Path) -> None:
    config = load_config(tmp_path / "store", None)
    reports: list[tuple[str, dict[str, Any]]] = []
    runtime = Runtime("flusher", config, zmq.Context(),
                      report=lambda state, *, force=False, **stats: reports.append((state, stats)))
    assert (runtime.name, runtime.config, runtime.endpoints) == ("flusher", config, config.endpoints)
    assert not runtime.stopping
    runtime.report("running", flushed=7)
    runtime.request_stop()
    assert runtime.stopping
    assert reports == [("running", {"flushed": 7})]
    runtime.close()
    assert runtime.ctx.closed


def test_a_stop_wakes_a_poll_that_watches_the_stop_fd(tmp_path: Path, ctx: zmq.Context[Any]) -> None:
    """The SIGTERM handler runs inside an actor's poll, which then goes on to its timeout: the stop
    also makes ``stop_fd`` readable, so a poller that watches it returns at once, and again on each
    later round (the loop ends at the top of the next one)."""
    runtime = Runtime("writer", load_config(tmp_path / "store", None), zmq.Context())
    poller = zmq.Poller()
    poller.register(bind(ctx, zmq.PULL, EVENTS), zmq.POLLIN)
    poller.register(runtime.stop_fd, zmq.POLLIN)
    assert poller.poll(0) == []
    runtime.request_stop()
    runtime.request_stop()  # twice (SIGTERM then SIGINT): the same readable descriptor
    assert poller.poll(60_000) == [(runtime.stop_fd, zmq.POLLIN)]
    assert poller.poll(60_000) == [(runtime.stop_fd, zmq.POLLIN)]
    runtime.close()


def test_open_connects_reports_to_the_supervisors_event_socket(tmp_path: Path, ctx: zmq.Context[Any]) -> None:
    run_dir = tempfile.mkdtemp(prefix="mq")  # short: ipc socket paths are limited in length
    try:
        config = load_config(tmp_path / "store", None, ipc={"run_dir": run_dir})
        config.endpoints.prepare()
        events = bind(ctx, zmq.PULL, config.endpoints.events)
        runtime = Runtime.open("writer", config)
        try:
            runtime.report("running", force=True, written=5)
            got = [(e["actor"], e["state"], e["written"]) for e in _received(events)]
            assert got == [("writer", "running", 5)]
        finally:
            runtime.close()
        assert runtime.ctx.closed
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_runtime_imports_no_actor() -> None:
    """It used to build every actor itself, each through a lazy import of a module that imports it."""
    actors = {name for name in _imported(ROOT / "actors" / "runtime.py") if name.startswith("mqstore.actors")}
    assert actors <= {"mqstore.actors.clock", "mqstore.actors.config"}


def test_the_registry_knows_every_actor_the_supervisor_starts(tmp_path: Path, ctx: zmq.Context[Any]) -> None:
    config = load_config(tmp_path / "store", None, broker={"readers": 2}, remoting={"enabled": True},
                         metrics={"enabled": True}, ha={"serve": True})
    names = Supervisor(config).names()
    assert set(START_ORDER) < set(names)
    slave = load_config(tmp_path / "slave", None, broker={"role": "SLAVE", "broker_id": 1},
                        ha={"master_address": "127.0.0.1:10912"})
    kinds = {name.partition("-")[0] for name in [*names, *Supervisor(slave).names()]}
    assert kinds == set(ACTOR_KINDS)
    with pytest.raises(ValueError, match="unknown actor 'nobody'"):
        build_actor("nobody", Runtime("nobody", config, ctx))


def test_a_report_that_says_nothing_new_holds_nothing(ctx: zmq.Context[Any]) -> None:
    """An idle actor's loop wakes for the report held back, which then says the same as the last one
    sent: the loop's next report must not be held again (that woke an idle builder once an interval)."""
    bind(ctx, zmq.PULL, EVENTS)
    now = [1_000]
    report = EventReporter(ctx, EVENTS, "cqbuilder", 1_000, clock=lambda: now[0])
    report("running", applied=1)
    now[0] += 10
    report("running", applied=1)  # within the interval: held, unread
    now[0] += 1_000
    report.send_held()  # due: the same as the last sent, dropped
    assert report.held_ms() is None
    report("running", applied=1)  # the loop's report after that wake
    assert report.held_ms() is None
