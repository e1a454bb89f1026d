"""What an actor is handed to run with: a ``Runtime``, one per actor process.

    name        the actor's name (``writer``, ``reader-0``, ...)
    config      the broker's configuration tree, ``endpoints`` its sockets
    ctx         the process's one ZeroMQ context
    stopping    raised when the actor should end its loop (``mqstore.actors.process`` ties SIGTERM and SIGINT to it)
    stop_fd     turns readable once ``stopping`` is raised: registered in a loop's poller, the round
                ends then rather than at the poll's timeout (the signal handler runs inside the poll,
                which would otherwise wait its time out)
    report      how the actor tells the supervisor how it is doing (a ``Report``); every actor reports
                between its rounds, so a report also sweeps ``open_files`` when a sweep is due
    poll        how a loop sleeps (``wait_ms`` and ``send_held`` where it sleeps otherwise): no longer
                than a report held back by the stats interval may wait, which then goes
    open_files  the process's bounded set of open store files (``mqstore.engine.log.open_files``),
                handed to whatever opens store files in it
    close       stops what ``open`` started and destroys the context

``Runtime.open`` builds the one a supervised process runs with: a context made after the process
started (never inherited from the fork server), with the broker's CURVE keys and a ZAP handler when it
serves ZeroMQ over TCP, and reports pushed to the supervisor's event socket (``EventReporter``). A
test builds one from a configuration and a context of its own; its reports go nowhere unless it
hands a ``report`` to collect them.

The runtime knows no actor: which class runs each kind is ``mqstore.actors.registry``'s, and what a process
does from start to exit (logging, dying with the supervisor, signals) is ``mqstore.actors.process``'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any, Protocol

import zmq
from zmq.auth.thread import ThreadAuthenticator

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.config import BrokerConfig
from mqstore.engine.log.open_files import OpenFiles
from mqstore.ipc.transport.curve import CurveContext, start_authenticator
from mqstore.ipc.transport.sockets import connect
from mqstore.ipc.wire import schema

EVENTS_HWM = 1000
IDLE_REPORT_MS = 30_000  # the same report goes again this often: a safety net for one the supervisor dropped


class Actor(Protocol):
    def run(self) -> None: ...


class Report(Protocol):
    def __call__(self, state: str, *, force: bool = False, **stats: Any) -> None: ...


def no_report(state: str, *, force: bool = False, **stats: Any) -> None:
    """The reports of an actor that runs without a supervisor: dropped."""


class EventReporter:
    """A supervised actor's ``report``: an event on the supervisor's event socket when what it says
    changed, at most once per ``interval_ms``, at once with ``force`` (a change of state). The
    supervisor keeps the last stats it got (its status, readiness and the metrics read those), so the
    same report again tells it nothing: it goes only every ``idle_ms``, a safety net, and an idle
    broker's actors do not wake the supervisor once an interval each. A report made within the
    interval is held (``held_ms``), and goes once the interval has passed if it says something new
    (``send_held``), whether or not the actor reports again: a count that moved just after a report
    is never left unsaid while the actor sleeps, and a busy actor's rounds pack no report."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str, name: str, interval_ms: int,
                 clock: Callable[[], int] = monotonic_ms, idle_ms: int = IDLE_REPORT_MS) -> None:
        self.name = name
        self.interval_ms = interval_ms
        self.idle_ms = idle_ms
        self._clock = clock
        self._events = connect(ctx, zmq.PUSH, endpoint, hwm=EVENTS_HWM)
        self._next_report_ms = 0  # a changed report goes from then on
        self._sent = b""  # the last report sent
        self._resend_ms = 0  # the same report goes again from then on
        self._held: tuple[str, dict[str, Any]] | None = None  # the last report within the interval

    def __call__(self, state: str, *, force: bool = False, **stats: Any) -> None:
        now = self._clock()
        if not force and now < self._next_report_ms and now < self._resend_ms:
            self._held = (state, stats)  # packed and compared once due: a busy actor's rounds pack nothing
            return
        self._send(state, stats, now, force=force)

    def held_ms(self) -> int | None:
        """How long until the report held back may go; None when none is held."""
        return max(self._next_report_ms - self._clock(), 0) if self._held is not None else None

    def send_held(self) -> None:
        """The report held back, once its interval has passed, if it says something new."""
        now = self._clock()
        if self._held is not None and now >= self._next_report_ms:
            self._send(*self._held, now)

    def _send(self, state: str, stats: dict[str, Any], now: int, *, force: bool = False) -> None:
        self._held = None
        event = schema.pack({"v": schema.VERSION, "actor": self.name, "pid": os.getpid(), "state": state, **stats})
        if not force and event == self._sent and now < self._resend_ms:
            return  # nothing new: the next report is compared at once (held, it would wake the loop again)
        self._next_report_ms = now + self.interval_ms
        # the supervisor busy or restarting drops a report: the next change or the safety net says it again
        with contextlib.suppress(zmq.Again):
            self._events.send(event, zmq.NOBLOCK)
            self._sent, self._resend_ms = event, now + self.idle_ms


class Runtime:
    def __init__(self, name: str, config: BrokerConfig, ctx: zmq.Context[Any], report: Report = no_report,
                 authenticator: ThreadAuthenticator | None = None) -> None:
        self.name = name
        self.config = config
        self.endpoints = config.endpoints
        self.ctx = ctx
        self._report = report
        self._reporter = report if isinstance(report, EventReporter) else None  # one that may hold a report
        self.open_files = OpenFiles(config.broker.open_files_max)
        self._next_sweep_ms = monotonic_ms() + config.broker.open_files_sweep_ms
        self.stopping = False
        self._authenticator = authenticator
        self.stop_fd, self._stop_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    @classmethod
    def open(cls, name: str, config: BrokerConfig) -> Runtime:
        """The runtime of a supervised actor process; call once, in that process."""
        endpoints = config.endpoints
        ctx = CurveContext(endpoints.curve, own_only=endpoints.internal)
        try:
            # every TCP socket of this process is a CURVE one; this decides which client keys get in, and
            # that only the broker's own key gets into the internal streams
            authenticator = (start_authenticator(ctx, config.curve_allowed(), own=endpoints.curve.public)
                             if endpoints.curve else None)
            report = EventReporter(ctx, endpoints.events, name, config.broker.stats_interval_ms)
        except BaseException:
            ctx.destroy(linger=0)
            raise
        return cls(name, config, ctx, report, authenticator)

    def report(self, state: str, *, force: bool = False, **stats: Any) -> None:
        """Tell the supervisor (``Report``); between two rounds, where no view of a mapped file is out
        but a borrowed one, let go of the open files idle or deleted since the last sweep."""
        now = monotonic_ms()
        if now >= self._next_sweep_ms:
            self._next_sweep_ms = now + self.config.broker.open_files_sweep_ms
            self.open_files.sweep()
        self._report(state, force=force, **stats)

    def wait_ms(self, timeout_ms: int) -> int:
        """``timeout_ms``, or less when a report held back is due sooner: how long the loop may sleep
        (then ``send_held``)."""
        held = self._reporter.held_ms() if self._reporter is not None else None
        return timeout_ms if held is None else min(timeout_ms, held)

    def send_held(self) -> None:
        """Send the report held back by the stats interval once it is due (``EventReporter``)."""
        if self._reporter is not None:
            self._reporter.send_held()

    def poll(self, poller: zmq.Poller, timeout_ms: int) -> dict[Any, int]:
        """``poller``'s ready sockets within ``timeout_ms``: an actor's loop sleeps here, so that a
        report held back goes on time however long the loop would have slept."""
        ready = dict(poller.poll(self.wait_ms(timeout_ms)))
        self.send_held()
        return ready

    def request_stop(self) -> None:
        """Raise the stop flag: the actor ends its loop at the end of the round it is in."""
        self.stopping = True
        with contextlib.suppress(BlockingIOError):  # full: it is readable already
            os.write(self._stop_w, b"\0")

    def close(self) -> None:
        if self._authenticator is not None:
            self._authenticator.stop()
        self.ctx.destroy(linger=0)
        os.close(self.stop_fd)
        os.close(self._stop_w)
