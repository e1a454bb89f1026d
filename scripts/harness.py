"""The broker-run harness: a real broker (``mqstore start``) in a subprocess, started, awaited until
ready, watched, killed and stopped, every wait polled with a deadline. The benchmarks
(``mqstore.scripts.bench``), the survival harnesses (``mqstore.scripts.survival``) and the integration tests all
start their brokers with it.

- ``BrokerProcess``: ``mqstore start`` on a store with the config file and start arguments given,
  the defaults otherwise (RocketMQ's geometry, the remoting front on): what a benchmark measures.
- ``Broker``: a broker on a tiny-geometry store under a root directory (files roll after a few
  records), with its own ``broker.toml`` and log, the remoting front off unless given a port; with
  ``tcp_port`` it serves ZeroMQ over TCP on loopback with CURVE keys made by ``mqstore keys``
  (``curve=False``: plain TCP, explicitly allowed). What the survival harnesses and the tests run.
- ``wait_for`` and ``free_port_range``: polling with a deadline, and loopback ports to serve on.

A broker that exits, is not ready or does not stop in time, and a condition not met by its
deadline, raise AssertionError (with the broker's log when it has one): a test fails with it, and a
survival harness reports it in its verdict.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Self

import psutil

from mqstore.ipc.transport.control import control_request
from mqstore.ipc.transport.curve import CurveKeys
from mqstore.ipc.transport.endpoints import Endpoints

ROOT = Path(__file__).resolve().parents[1]  # the child runs here: ``python -m scripts...`` imports this tree
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 120.0  # a broker stopping after a benchmark flushes what it wrote first
POLL_S = 0.02

TINY_TOML = """
[store.geometry]
commitlog_file_size = {commitlog}
cq_entries_per_file = {cq}
index_slot_count = 64
index_entry_count = 256

[flush]
mode = "{mode}"

[broker]
readers = {readers}
disk_check_interval_ms = 100
{broker_extra}

[supervisor]
{supervisor}
"""
SUPERVISOR_DEFAULTS = {"backoff_initial_ms": 50, "backoff_max_ms": 500}


def wait_for(predicate: Any, timeout_s: float, what: str, interval_s: float = POLL_S) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def free_port_range(count: int) -> int:
    """A base port with ``count`` free loopback ports from it. The search starts at a random place, so
    test runs side by side on one machine rarely race each other for the same ports."""
    start = random.randrange(23000, 50000)
    for base in [*range(start, 60000, 37), *range(23000, start, 37)]:
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free port range on loopback")


class BrokerProcess:
    """``mqstore start --store STORE [--config CONFIG] START_ARGS...`` in a subprocess, its output
    appended to ``log_path`` (discarded without one). ``start`` returns once the supervisor says
    every actor is ready; ``stop`` is the orderly stop (SIGTERM) and returns the exit status."""

    def __init__(self, store: Path, *start_args: str, config: Path | None = None,
                 log_path: Path | None = None) -> None:
        self.store = store.absolute()  # the child runs in ROOT: a relative path would name another store
        self.start_args = start_args
        self.config_path = config.absolute() if config is not None else None
        self.log_path = log_path
        self.extra_env: dict[str, str] = {}  # added to this process's environment for the broker's tree
        self.proc: subprocess.Popen[bytes] | None = None

    def start_argv(self) -> list[str]:
        """``mqstore start`` on this broker's store and configuration."""
        config = ["--config", str(self.config_path)] if self.config_path is not None else []
        # metrics off unless the start arguments turn them on: a benchmark's broker CPU is the
        # broker's own, and brokers run side by side do not share its port
        return [sys.executable, "-m", "mqstore.scripts.cli.mqstore", "start", "--store", str(self.store), *config,
                "--metrics", "off", *self.start_args]

    def launch(self) -> Self:
        """``mqstore start`` in the background, not waiting for anything."""
        env = {**os.environ, **self.extra_env}
        if self.log_path is None:
            self.proc = subprocess.Popen(self.start_argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         cwd=ROOT, env=env)
        else:
            with open(self.log_path, "ab") as log:  # the child writes it through its own descriptor
                self.proc = subprocess.Popen(self.start_argv(), stdout=log, stderr=log, cwd=ROOT, env=env)
        return self

    def mqstore(self, *argv: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        """Another ``mqstore`` command, as a user runs it (``--store`` is added)."""
        return subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", *argv, "--store", str(self.store)],
                              capture_output=True, text=True, cwd=ROOT, timeout=timeout_s)

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> Self:
        self.launch()
        try:
            self.wait_ready(timeout_s)
        except BaseException:
            self.__exit__()  # never ready: killed rather than left running past the run that started it
            raise
        return self

    def status(self) -> dict[str, Any] | None:
        """The supervisor's status reply; None while nobody answers."""
        try:
            return control_request(self.store, "status", timeout_ms=500)
        except ConnectionError:
            return None

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"broker exited with {self.proc.returncode}:\n{self.logs()}")
            s = self.status()
            return s if s is not None and s.get("ready") else None
        return wait_for(ready, timeout_s, f"the broker on {self.store} to be ready")  # type: ignore[no-any-return]

    def pid_of(self, actor: str) -> int:
        status = self.status()
        assert status is not None
        return int(status["actors"][actor]["pid"])

    def kill(self, actor: str, sig: int = signal.SIGKILL) -> int:
        pid = self.pid_of(actor)
        os.kill(pid, sig)
        return pid

    def kill_tree(self) -> None:
        """SIGKILL to the supervisor; its actors follow it (each asked the kernel for SIGTERM when its
        parent dies) and are waited for. ``start`` again recovers the store as after a crash."""
        if self.proc is None:
            return
        self._kill_and_wait()
        self.proc = None

    def _kill_and_wait(self) -> None:
        assert self.proc is not None
        try:
            actors = psutil.Process(self.proc.pid).children(recursive=True)  # the fork server and the actors
        except psutil.NoSuchProcess:
            actors = []  # it exited by itself: its actors were stopped by it
        self.proc.kill()
        self.proc.wait()
        psutil.wait_procs(actors, timeout=30)

    def wait_restarted(self, actor: str, old_pid: int, timeout_s: float = 30) -> None:
        def restarted() -> bool:
            s = self.status()
            if s is None:
                return False
            info = s["actors"][actor]
            return bool(info["pid"] != old_pid and info["state"] == "running")
        wait_for(restarted, timeout_s, f"{actor} to restart")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"broker did not stop within {timeout_s} s:\n{self.logs()}") from None
        self.proc = None
        return code

    def discard(self) -> None:
        """Stop, and remove the store: a benchmark's run is GiBs of disk the next runs need."""
        self.stop()
        shutil.rmtree(self.store, ignore_errors=True)

    def logs(self) -> str:
        """The tail of the broker's log ("" without one)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-20000:]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """SIGKILL to a supervisor still running; its actors follow (each asked the kernel for SIGTERM
        when its parent dies) and are waited for, so that what a test reads next is what they left,
        not files an actor's stop is still flushing."""
        if self.proc is not None and self.proc.poll() is None:
            self._kill_and_wait()


class Broker(BrokerProcess):
    """A broker on a tiny-geometry store under ``root``: the store in ``root/store`` (or ``store``),
    its config ``root/broker.toml``, its log ``root/broker.log``, CURVE keys in ``root/keys``."""

    def __init__(self, root: Path, *, mode: str = "ASYNC_FLUSH", readers: int = 1, commitlog: int = 256 * 1024,
                 cq: int = 512, extra_toml: str = "", broker_extra: str = "", flap_restarts: int = 20,
                 tcp_port: int | None = None, curve: bool = True, remoting_port: int | None = None,
                 store: Path | None = None, supervisor: dict[str, int] | None = None,
                 metrics_port: int | None = None) -> None:
        """``broker_extra``: more ``key = value`` lines for the [broker] table (``extra_toml`` may
        not open it a second time). ``remoting_port``: serve RocketMQ clients there (off without it).
        ``metrics_port``: serve the metrics and the dashboard there (off without it).
        ``supervisor``: [supervisor] values over the tests' quick backoff."""
        remoting = ("--remoting", "off") if remoting_port is None else (
            "--remoting", "on", "--remoting-port", str(remoting_port))
        metrics = () if metrics_port is None else ("--metrics", "on", "--metrics-port", str(metrics_port))
        super().__init__(root / "store" if store is None else store, *remoting, *metrics, config=root / "broker.toml",
                         log_path=root / "broker.log")
        self.root = root
        self.remoting_port = remoting_port
        self.keys_dir = root / "keys"
        self.readers = readers
        self.tcp_port = tcp_port
        if tcp_port is not None:
            extra_toml += f'\n[ipc]\ntcp_host = "127.0.0.1"\ntcp_base_port = {tcp_port}\n'
            if curve:
                subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "keys", "--out",
                                str(self.keys_dir)],
                               check=True, capture_output=True, cwd=ROOT)
                extra_toml += 'curve_secret_key = "keys/server.key_secret"\ncurve_clients_dir = "keys/clients"\n'
            else:
                extra_toml += "allow_plain_tcp = true\n"
        supervisor_values = {**SUPERVISOR_DEFAULTS, "flap_restarts": flap_restarts, **(supervisor or {})}
        (root / "broker.toml").write_text(TINY_TOML.format(
            mode=mode, readers=readers, commitlog=commitlog, cq=cq, broker_extra=broker_extra,
            supervisor="\n".join(f"{k} = {v}" for k, v in supervisor_values.items())) + extra_toml)

    def endpoints(self, curve: CurveKeys | str | None = "client") -> Endpoints:
        """Where clients find this broker: its ipc sockets, or its TCP ports with ``curve`` (a client
        name in the broker's key directory, explicit keys, or None for none)."""
        if self.tcp_port is None:
            return Endpoints.for_store(self.store, self.readers)
        keys = CurveKeys.for_client(self.keys_dir, curve) if isinstance(curve, str) else curve
        return Endpoints.for_store(self.store, self.readers, tcp_host="127.0.0.1", tcp_base_port=self.tcp_port,
                                   curve=keys)
