"""When the broker serves: every actor has reported "running", and the remoting front, when it is on,
answers a route query on its TCP port.

An actor reports "running" once it is built, just before its loop binds its sockets. ZeroMQ clients
never notice (a connect made before the bind waits for it), but a RocketMQ client's TCP connect is
refused until the front listens, and the client gives up at once ("No route info of this topic").
So once every other actor runs (the writer, which route queries need, among them), the supervisor
asks the front a real route query, once per front process; until one is answered the broker is
not ready, and says what it waits for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.config_listeners import RemotingConfig
from mqstore.ipc.remoting import codec as rm

log = logging.getLogger("mqstore")

FRONT = "remoting"
PROBE_TOPIC = "TBW102"      # RocketMQ's default topic: asking for its route creates nothing
PROBE_TIMEOUT_S = 1.0       # the supervisor's loop waits this long at most for one probe
PROBE_INTERVAL_MS = 100


class Watched(Protocol):
    """What readiness reads of an actor the supervisor watches."""

    state: str

    @property
    def pid(self) -> int | None: ...


def front_answers(host: str, port: int) -> bool:
    """Whether the remoting front at host:port answers a route query with SUCCESS."""
    try:
        with rm.RemotingClient(host, port, timeout_s=PROBE_TIMEOUT_S) as client:
            return client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": PROBE_TOPIC}).code == rm.SUCCESS
    except (OSError, rm.FrameError):
        return False


class Readiness:
    """What the broker still waits for before it serves ([] once it does)."""

    def __init__(self, remoting: RemotingConfig, clock: Callable[[], int] = monotonic_ms,
                 probe: Callable[[str, int], bool] = front_answers) -> None:
        self.front_enabled = remoting.enabled
        # the listening host, dialled locally ("0.0.0.0" listens on loopback too)
        self.host = "127.0.0.1" if remoting.host in ("", "0.0.0.0") else remoting.host
        self.port = remoting.port
        self._clock = clock
        self._probe = probe
        self._answered_pid: int | None = None  # the front process that answered a route query
        self._next_probe_ms = 0

    def probe_pending(self, actors: Mapping[str, Watched]) -> bool:
        """Whether the front is to be asked (again, ``PROBE_INTERVAL_MS`` after a probe it did not answer):
        the one part of readiness that no event of an actor brings."""
        front = actors.get(FRONT)
        return (self.front_enabled and front is not None and front.state == "running"
                and front.pid != self._answered_pid
                and all(a.state == "running" for name, a in actors.items() if name != FRONT))

    def check(self, actors: Mapping[str, Watched]) -> list[str]:
        """Probe the front when it is due, then what is still awaited."""
        front = actors.get(FRONT)
        if front is not None and self.probe_pending(actors) and self._clock() >= self._next_probe_ms:
            self._next_probe_ms = self._clock() + PROBE_INTERVAL_MS
            if self._probe(self.host, self.port):
                self._answered_pid = front.pid
                log.info("the remoting front answers route queries on %s:%d", self.host, self.port)
        return self.waiting_for(actors)

    def waiting_for(self, actors: Mapping[str, Watched]) -> list[str]:
        """What the broker still waits for, as the supervisor last saw it (no probing)."""
        if not actors:
            return ["the actors to start"]
        waiting = [f"{name}: {a.state}" for name, a in actors.items() if a.state != "running"]
        front = actors.get(FRONT)
        if self.front_enabled and front is not None and front.state == "running" \
                and front.pid != self._answered_pid:
            waiting.append(f"the remoting front to answer route queries on {self.host}:{self.port}")
        return waiting
