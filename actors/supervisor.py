"""The supervisor: recovers the store, launches the actors in order, watches them, restarts a dead
one with backoff (giving up, loudly, when a store actor flaps), serves status on its control socket (ready once
every actor serves, ``mqstore.actors.readiness``), and stops everything in order on SIGTERM / SIGINT or a
``stop`` request.

It holds the store's lock for the broker's whole life (offline tools then refuse to write into it),
creates the ``abort`` marker once recovery is done and removes it only after a clean stop in which
the derived files caught up with the commitlog.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import multiprocess
import psutil
import zmq

from mqstore.actors.actor_set import actor_names, stop_groups
from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.config import BrokerConfig
from mqstore.actors.process import name_process, on_stop_signals, run_actor, setup_logging
from mqstore.actors.promotion import promoted_config, refusal
from mqstore.actors.readiness import PROBE_INTERVAL_MS, Readiness
from mqstore.actors.registry import ACTOR_KINDS
from mqstore.actors.start_recovery import recover_at_start
from mqstore.actors.store_holder import hold_store
from mqstore.actors.wake import Wake
from mqstore.engine import MessageStore
from mqstore.engine.ha.promotion import promote_store
from mqstore.engine.meta.metafile import create_abort
from mqstore.ipc.transport.sockets import bind
from mqstore.ipc.wire import replies, requests, schema

log = logging.getLogger("mqstore")

EXIT_OK = 0
EXIT_GAVE_UP = 3
# Actors are forked from one server process that imported these once (numpy, zmq, msgpack, the
# engine, the runtime: what every actor runs on), instead of each importing them anew: a broker's
# start costs its actors' imports once, not a dozen times. It imports no actor's own module
# (``mqstore.actors.registry`` imports a kind's module when it builds one) and opens nothing: each actor
# makes its own ZeroMQ context and opens its files after the fork.
FORK_SERVER_PRELOAD = ("mqstore.actors.process",)
# The listeners outsiders reach hold no part of the store: no file, no progress, nothing the store's
# actors wait on. A client that can crash one must not be able to stop the store with it, so when one
# flaps the supervisor does not give up on the broker: it keeps restarting it at the longest backoff
# and says so loudly, while the writer, the readers and their ipc clients keep being served.
EDGE_ACTORS = frozenset({"remoting", "metrics"})
# The loop sleeps until something happens: an event or a control request on its sockets, an actor's
# exit (its process's sentinel turns readable), a stop signal (a self-pipe), a restart's backoff or a
# readiness probe coming due. Past those it wakes this often, a safety net that finds nothing to do.
IDLE_WAKE_MS = 5_000


@dataclass(slots=True)
class ActorState:
    name: str
    process: Any = None
    restarts: list[int] = field(default_factory=list)   # monotonic ms of each restart within the flap window
    restarts_total: int = 0                               # every restart since the broker started
    restart_at_ms: int = 0                                # pending restart time, 0 when none
    state: str = "starting"
    stats: dict[str, Any] = field(default_factory=dict)
    usage: Any = None  # psutil.Process of the current pid: cpu_percent measures between two calls
    handle: Any = None  # psutil.Process of the current pid from its start: is that very process still there

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()


class Supervisor:
    def __init__(self, config: BrokerConfig, on_ready: Callable[[], None] = lambda: None) -> None:
        """``on_ready`` is called once, the first time every actor serves (``mqstore.actors.readiness``)."""
        self.config = config
        self.store_dir = Path(config.store_dir)
        self.endpoints = config.endpoints
        self.mp = multiprocess.get_context("forkserver")
        self.mp.set_forkserver_preload(list(FORK_SERVER_PRELOAD))
        self.actors: dict[str, ActorState] = {}
        self.stop_requested = False
        self.promote_to: str | None = None  # a slave asked to become this master role (``mqstore promote``)
        self.gave_up = ""
        self._lock_fd = -1
        self.recovery_summary: dict[str, Any] = {}
        self.readiness = Readiness(config.remoting)
        self._on_ready = on_ready
        self._ready_once = False
        self._wake: Wake | None = None  # what wakes the loop, while serving

    # -- start -------------------------------------------------------------------------------------

    def _lock(self) -> None:
        self._lock_fd = hold_store(self.store_dir)  # StoreLockedError names the holder

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _recover(self) -> None:
        """Recover the store before any actor takes traffic (``mqstore.actors.start_recovery``); fix the
        geometry every actor uses."""
        self.config, self.recovery_summary = recover_at_start(self.config)
        create_abort(self.store_dir, os.getpid())

    def _spawn(self, name: str) -> None:
        actor = self.actors.setdefault(name, ActorState(name))
        actor.process = self.mp.Process(target=run_actor, args=(name, self.config.to_dict()), name=name)
        actor.process.start()
        if self._wake is not None:
            self._wake.watch(name, actor.process.sentinel)
        try:
            actor.handle = psutil.Process(actor.pid)
        except psutil.Error:
            actor.handle = None  # already gone: the watch restarts it
        actor.state = "starting"
        actor.restart_at_ms = 0
        log.info("started %s (pid %s)", name, actor.pid)

    def names(self) -> list[str]:
        return actor_names(self.config, set(ACTOR_KINDS))

    # -- run ---------------------------------------------------------------------------------------

    def run(self) -> int:
        """Serve until stopped; a slave promoted by command (``mqstore.actors.promotion``) stops, is
        promoted, and serves again as a master."""
        while True:
            code = self._run_once()
            if self.promote_to is None or code != EXIT_OK or self.stop_requested:
                return code
            self._promote(self.promote_to)

    def _promote(self, role: str) -> None:
        self.promote_to = None
        self._lock()
        try:
            stored = promote_store(self.store_dir, self.config.store.geometry, role, wall_ms())
        finally:
            self._unlock()
        log.warning("promoted to %s: epoch %d opens at commitlog offset %d; starting again as the master",
                    stored.role, stored.epoch, stored.start)
        self.config = promoted_config(self.config, role)
        self.actors = {}
        self.readiness = Readiness(self.config.remoting)

    def _run_once(self) -> int:
        self._lock()  # first: a second start on a held store touches nothing
        try:
            self.endpoints.prepare()
            self._recover()
            # again right before the sockets bind: a status poll during the recovery that found no
            # control socket may have removed the empty run directory it took for its own
            self.endpoints.prepare()
            ctx: zmq.Context[Any] = zmq.Context()
            try:
                code = self._serve(ctx)
            finally:
                ctx.destroy(linger=0)
            self.endpoints.remove_sockets(remove_dir=not self.config.ipc.run_dir)  # every actor has exited
            return code
        finally:
            self._unlock()

    def _request_stop(self) -> None:
        self.stop_requested = True
        if self._wake is not None:
            self._wake.stop()

    def _serve(self, ctx: zmq.Context[Any]) -> int:
        self._wake = wake = Wake()
        try:
            return self._serve_until_stopped(ctx, wake)
        finally:
            self._wake = None
            wake.close()

    def _serve_until_stopped(self, ctx: zmq.Context[Any], wake: Wake) -> int:
        on_stop_signals(self._request_stop)
        control = bind(ctx, zmq.REP, self.endpoints.control, rcvtimeo_ms=0)
        events = bind(ctx, zmq.PULL, self.endpoints.events, hwm=100_000)
        wake.register(control)
        wake.register(events)
        for name in self.names():
            self._spawn(name)
        while not self.stop_requested and not self.gave_up and self.promote_to is None:
            ready = wake.poll(self._wait_ms())
            if events in ready:
                self._drain_events(events)
            if control in ready:
                self._serve_control(control)
            self._watch()
            self._check_ready()
        if self.gave_up:
            log.error("giving up: %s", self.gave_up)
        self._stop_all(events)
        return EXIT_GAVE_UP if self.gave_up else EXIT_OK

    def _wait_ms(self) -> int:
        """How long the loop may sleep: until the first restart due, a readiness probe while one is
        pending, or the idle safety net; every other cause of work wakes the poll itself."""
        now = monotonic_ms()
        due = [a.restart_at_ms - now for a in self.actors.values() if a.restart_at_ms]
        if self.readiness.probe_pending(self.actors):
            due.append(PROBE_INTERVAL_MS)
        return max(0, min([IDLE_WAKE_MS, *due]))

    def _drain_events(self, events: zmq.Socket[Any]) -> None:
        while True:
            try:
                frame = events.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                event = schema.unpack(frame)
                actor = self.actors.get(str(event["actor"]))
            except (schema.SchemaError, KeyError):
                continue
            if actor is not None and event.get("pid") == actor.pid:
                actor.state = str(event.get("state", actor.state))
                actor.stats = {k: v for k, v in event.items() if k not in ("v", "actor", "pid", "state")}

    def _watch(self) -> None:
        """Reap dead actors and restart them with backoff; too many restarts in the window: give up."""
        now = monotonic_ms()
        sup = self.config.supervisor
        for actor in self.actors.values():
            if actor.alive():
                continue
            if actor.restart_at_ms == 0:
                if self._wake is not None:
                    self._wake.unwatch(actor.name)  # its sentinel stays readable
                self._end_orphan(actor)
                code = actor.process.exitcode if actor.process is not None else None
                actor.restarts = [t for t in actor.restarts if now - t < sup.flap_window_ms]
                flapping = len(actor.restarts) >= sup.flap_restarts
                if flapping and actor.name in EDGE_ACTORS:
                    log.error("%s died %d times within %d ms (last exit code %s); the store keeps serving and "
                              "it is restarted every %d ms", actor.name, len(actor.restarts) + 1, sup.flap_window_ms,
                              code, sup.backoff_max_ms)
                elif flapping:
                    self.gave_up = (f"{actor.name} died {len(actor.restarts) + 1} times within "
                                    f"{sup.flap_window_ms} ms (last exit code {code})")
                    return
                delay = min(sup.backoff_initial_ms * (2 ** len(actor.restarts)), sup.backoff_max_ms)
                actor.restart_at_ms = now + delay
                actor.state = f"dead (exit {code}), restart in {delay} ms"
                log.warning("%s exited with %s; restarting in %d ms", actor.name, code, delay)
            elif now >= actor.restart_at_ms:
                actor.restarts.append(now)
                actor.restarts_total += 1
                self._spawn(actor.name)

    def _end_orphan(self, actor: ActorState) -> None:
        """An actor looks dead when the fork server that started it died (the server reports exit
        statuses): the kernel sent the actor SIGTERM then, but it may still be stopping, and a new
        one must not start beside it. So it is killed, and waited for, before its restart is due."""
        handle, actor.handle = actor.handle, None
        if handle is None:
            return
        deadline = time.monotonic() + self.config.supervisor.stop_timeout_ms / 1000
        try:
            if handle.status() != psutil.STATUS_ZOMBIE:
                log.warning("%s (pid %d) outlived the process that started it; killing it", actor.name, handle.pid)
                handle.kill()
            while handle.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
                time.sleep(0.01)
        except psutil.NoSuchProcess:
            return

    def _check_ready(self) -> None:
        if not self.readiness.check(self.actors) and not self._ready_once:
            self._ready_once = True
            log.info("ready: every actor serves")
            self._on_ready()

    # -- control -----------------------------------------------------------------------------------

    def _serve_control(self, control: zmq.Socket[Any]) -> None:
        try:
            frame = control.recv(zmq.NOBLOCK)
        except zmq.Again:
            return
        request_id: Any = None
        try:
            message = schema.unpack(frame, max_bytes=1 << 20)
            request_id = message.get("id")
            request = requests.decode_request(message, requests.SUPERVISOR)
            if isinstance(request, requests.Status):
                reply = self.status().encode(request_id)
            elif isinstance(request, requests.Promote):
                reply = self._accept_promotion(request.master_role).encode(request_id)
            elif isinstance(request, requests.Stop):
                self.stop_requested = True
                # the pid and store let ``mqstore stop`` wait for the exit and see how it ended
                reply = replies.StopReply(True, os.getpid(), str(self.store_dir.resolve())).encode(request_id)
            else:
                reply = replies.PingReply(os.getpid()).encode(request_id)
        except requests.UnknownOpError as exc:
            reply = schema.error_reply(request_id, schema.UNKNOWN_OP, str(exc))
        except schema.SchemaError as exc:
            reply = schema.error_reply(request_id, schema.BAD_REQUEST, str(exc))
        control.send(schema.pack(reply))

    def _accept_promotion(self, role: str) -> replies.PromoteReply:
        reason = refusal(self.config, role)
        if reason is not None:
            log.warning("promotion to %s refused: %s", role, reason)
            return replies.PromoteReply(False, reason)
        log.warning("promotion to %s asked: stopping the slave's actors", role)
        self.promote_to = role
        return replies.PromoteReply(True, f"stopping the slave's actors; the broker starts again as {role}")

    def status(self) -> replies.StatusReply:
        log_writer = self.actors.get("ha" if self.config.is_slave else "writer")  # a slave's ha appends its log
        written = int(log_writer.stats.get("written", 0)) if log_writer is not None else 0
        waiting = self.readiness.waiting_for(self.actors)
        actors = {}
        for actor in self.actors.values():
            info: dict[str, Any] = {"pid": actor.pid, "state": actor.state, "restarts": len(actor.restarts),
                                    "restarts_total": actor.restarts_total, **actor.stats}
            if actor.alive():
                try:
                    if actor.usage is None or actor.usage.pid != actor.pid:
                        actor.usage = psutil.Process(actor.pid)
                        actor.usage.cpu_percent(interval=None)  # starts the measurement
                    info["cpu_percent"] = actor.usage.cpu_percent(interval=None)
                    info["rss_bytes"] = actor.usage.memory_info().rss
                    cpu = actor.usage.cpu_times()
                    info["cpu_s"] = cpu.user + cpu.system
                except psutil.Error:
                    actor.usage = None
            if "applied" in actor.stats:
                info["lag_bytes"] = max(0, written - int(actor.stats["applied"]))
            actors[actor.name] = info
        flushed = int(self.actors["flusher"].stats.get("flushed", 0)) if "flusher" in self.actors else 0
        return replies.StatusReply(str(self.store_dir), os.getpid(), self.config.flush.mode, written, flushed,
                                   self.recovery_summary, actors, not waiting, waiting,
                                   self.config.metrics.url if self.config.metrics.enabled else None,
                                   self.config.broker.role)

    # -- stop --------------------------------------------------------------------------------------

    def _stop_all(self, events: zmq.Socket[Any]) -> None:
        """In ``mqstore.actors.actor_set.stop_groups``' order: the scheduler and the timer save their
        progress, the transaction actor ends what the front handed it, the writer answers what waits
        for a flush, and the flush service's last fsync covers everything."""
        for group in stop_groups(self.config, list(self.actors)):
            self._stop_group(group, events)
        clean = all(a.process is not None and a.process.exitcode == 0 for a in self.actors.values())
        self._finish(clean)

    def _stop_group(self, names: list[str], events: zmq.Socket[Any]) -> None:
        deadline = time.monotonic() + self.config.supervisor.stop_timeout_ms / 1000
        for name in names:
            actor = self.actors.get(name)
            if actor is not None and actor.alive():
                actor.process.terminate()
        for name in names:
            actor = self.actors.get(name)
            if actor is None or actor.process is None:
                continue
            actor.process.join(max(0.0, deadline - time.monotonic()))
            if actor.process.is_alive():
                log.error("%s did not stop in time; killing it", name)
                actor.process.kill()
                actor.process.join()
        self._drain_events(events)

    def _finish(self, clean: bool) -> None:
        """Bring the derived files level with the commitlog (what builders had not applied when they
        stopped), flush, and only then remove the abort marker: the next start recovers normally."""
        if self.gave_up:
            log.error("abort marker kept: the next start recovers abnormally")
            return
        self._unlock()
        # the marker stays through the catch-up open (its close removes it): a crash during the open
        # leaves it, and the next start recovers abnormally
        with MessageStore.open(self.store_dir, last_stop_clean=True) as store:
            log.info("stopped; derived files caught up (%d records re-dispatched)",
                     store.recovery.cq_redispatched)
        if not clean:
            log.warning("an actor did not exit cleanly; recovery on stop repaired what it left")


def serve(config: BrokerConfig, on_ready: Callable[[], None] = lambda: None) -> int:
    setup_logging("supervisor")
    name_process("supervisor", str(config.store_dir))
    return Supervisor(config, on_ready).run()
