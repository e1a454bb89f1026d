"""What every actor process has: one ZeroMQ context (made after the process started, never inherited;
with the broker's CURVE keys and a ZAP handler when it serves ZeroMQ over TCP), a stop flag raised by
SIGTERM or SIGINT, logging to stderr, and an event channel to the supervisor.

``run_actor`` is the target the supervisor starts each process with (spawn method): it rebuilds the
configuration from plain values, builds the named actor and runs it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
from types import FrameType
from typing import Any, Protocol

import multiprocess
import zmq

# the clocks live in actors.clock: re-exported here until the writer's and the reader's imports move
from actors.clock import monotonic_ms as monotonic_ms
from actors.clock import wall_ms as wall_ms
from actors.config import BrokerConfig
from ipc import schema
from ipc.curve import CurveContext, start_authenticator
from ipc.sockets import connect

log = logging.getLogger("mqstore")
PR_SET_PDEATHSIG = 1


class Actor(Protocol):
    def run(self) -> None: ...


class Runtime:
    def __init__(self, name: str, config: BrokerConfig) -> None:
        self.name = name
        self.config = config
        self.endpoints = config.endpoints
        self.ctx: zmq.Context[Any] = CurveContext(self.endpoints.curve)
        # every TCP socket of this process is a CURVE one; this decides which client keys get in
        self._auth = start_authenticator(self.ctx, config.curve_allowed()) if self.endpoints.curve else None
        self.stopping = False
        self._events = connect(self.ctx, zmq.PUSH, self.endpoints.events, hwm=1000)
        self._next_report_ms = 0
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def report(self, state: str, *, force: bool = False, **stats: Any) -> None:
        """Tell the supervisor how this actor is doing, at most once per stats interval."""
        now = monotonic_ms()
        if not force and now < self._next_report_ms:
            return
        self._next_report_ms = now + self.config.broker.stats_interval_ms
        event = {"v": schema.VERSION, "actor": self.name, "pid": os.getpid(), "state": state, **stats}
        # the supervisor busy or restarting drops a report: the next one carries the same facts
        with contextlib.suppress(zmq.Again):
            self._events.send(schema.pack(event), zmq.NOBLOCK)

    def close(self) -> None:
        if self._auth is not None:
            self._auth.stop()
        self.ctx.destroy(linger=0)


def setup_logging(name: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("MQSTORE_LOG_LEVEL", "INFO"),
                        format=f"%(asctime)s {name}[%(process)d] %(levelname)s %(message)s")


def build_actor(name: str, runtime: Runtime) -> Actor:
    kind = name.split("-")[0]
    if kind == "writer":
        from actors.writer.actor import CommitLogWriterActor
        return CommitLogWriterActor(runtime)
    if kind == "flusher":
        from actors.flusher import FlushActor
        return FlushActor(runtime)
    if kind == "cqbuilder":
        from actors.builder import ConsumeQueueBuilderActor
        return ConsumeQueueBuilderActor(runtime)
    if kind == "indexbuilder":
        from actors.builder import IndexBuilderActor
        return IndexBuilderActor(runtime)
    if kind == "reader":
        from actors.reader.actor import ReaderActor
        return ReaderActor(runtime, int(name.split("-")[1]))
    if kind == "remoting":
        from actors.remoting.actor import RemotingActor
        return RemotingActor(runtime)
    raise ValueError(f"unknown actor {name!r}")


def die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the supervisor dies (even by SIGKILL), so no actor outlives it.

    The supervisor's pid comes from the process object it started, not from ``getppid`` here: the
    request only covers a parent alive when it is made, and a supervisor killed in the second an
    actor spends starting up has already handed it to init. An orphan must stop before it opens a
    file, or it keeps writing beside the next supervisor's actors."""
    parent = multiprocess.parent_process()
    supervisor_pid = parent.pid if parent is not None else os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        log.warning("cannot ask to die with the supervisor on this platform")
    if os.getppid() != supervisor_pid:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def run_actor(name: str, config_dict: dict[str, Any]) -> None:
    """Process entry point: build the actor and run it until SIGTERM; a fault exits non-zero so the
    supervisor restarts the process."""
    setup_logging(name)
    die_with_parent()
    runtime = Runtime(name, BrokerConfig.from_dict(config_dict))
    try:
        actor = build_actor(name, runtime)
        runtime.report("running", force=True)
        actor.run()
        runtime.report("stopped", force=True)
    except Exception:
        log.exception("%s failed", name)
        runtime.close()
        sys.exit(1)
    runtime.close()
