"""A real broker for integration tests: ``mqstore start`` in a subprocess on a tiny-geometry store,
with readiness, status, actor kills and an orderly stop, all polled with deadlines. With ``tcp_port``
it serves ZeroMQ over TCP on loopback with CURVE keys made by ``mqstore keys`` (``curve=False``:
plain TCP, explicitly allowed)."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import MessageStore
from ipc.control import control_request
from ipc.curve import CurveKeys
from ipc.endpoints import Endpoints

ROOT = Path(__file__).resolve().parents[2]

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


@dataclass(slots=True)
class AckCheck:
    """Acknowledged sends checked against a stopped broker's store: a few examples of each failure."""

    acked: int = 0
    lost: list[str] = field(default_factory=list)           # not readable at its queue offset
    garbled: list[str] = field(default_factory=list)        # readable with another body
    offset_reused: list[str] = field(default_factory=list)  # one queue offset acknowledged twice
    expired: list[str] = field(default_factory=list)        # below the queue's min: retention deleted it
    counts: dict[str, int] = field(default_factory=lambda: {"lost": 0, "garbled": 0, "offset_reused": 0,
                                                            "expired": 0})

    def add(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        examples: list[str] = getattr(self, kind)
        if len(examples) < 5:
            examples.append(what)

    @property
    def ok(self) -> bool:
        return self.acked > 0 and not any(n for kind, n in self.counts.items() if kind != "expired")


def check_acked(store_dir: Path, acked: Iterable[tuple[str, int, int, str]]) -> AckCheck:
    """Each acknowledged send, as (topic, queue, queue offset, sha256 hex of the body), must be
    readable exactly once at its queue offset with its body, unless retention deleted its file (a
    full disk deletes the oldest files, RocketMQ's rule). Opens the store offline."""
    check = AckCheck()
    seen: dict[tuple[str, int, int], str] = {}
    for topic, queue, offset, digest in acked:
        check.acked += 1
        where = f"{topic}/{queue}@{offset}"
        if (topic, queue, offset) in seen:
            check.add("offset_reused", where)
        seen[(topic, queue, offset)] = digest
    with MessageStore.open(store_dir) as store:
        for (topic, queue, offset), digest in seen.items():
            where = f"{topic}/{queue}@{offset}"
            got = store.get(topic, queue, offset, max_count=1)
            if offset < got.min_queue_offset:
                check.add("expired", where)
            elif not got.messages or got.messages[0].queue_offset != offset:
                check.add("lost", where)
            elif hashlib.sha256(got.messages[0].body).hexdigest() != digest:
                check.add("garbled", where)
    return check


def wait_for(predicate: Any, timeout_s: float, what: str, interval_s: float = 0.02) -> Any:
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
    """A base port with ``count`` free loopback ports from it."""
    for base in range(23000, 60000, 37):
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


class Broker:
    def __init__(self, root: Path, *, mode: str = "ASYNC_FLUSH", readers: int = 1, commitlog: int = 256 * 1024,
                 cq: int = 512, extra_toml: str = "", broker_extra: str = "", flap_restarts: int = 20,
                 tcp_port: int | None = None, curve: bool = True, remoting_port: int | None = None,
                 supervisor: dict[str, int] | None = None) -> None:
        """``broker_extra``: more ``key = value`` lines for the [broker] table (``extra_toml`` may
        not open it a second time). ``remoting_port``: serve RocketMQ clients there (off without it).
        ``supervisor``: [supervisor] values over the tests' quick backoff."""
        self.root = root
        self.remoting_port = remoting_port
        self.store = root / "store"
        self.config_path = root / "broker.toml"
        self.keys_dir = root / "keys"
        self.readers = readers
        self.tcp_port = tcp_port
        if tcp_port is not None:
            extra_toml += f'\n[ipc]\ntcp_host = "127.0.0.1"\ntcp_base_port = {tcp_port}\n'
            if curve:
                subprocess.run([sys.executable, "-m", "scripts.cli.mqstore", "keys", "--out", str(self.keys_dir)],
                               check=True, capture_output=True, cwd=ROOT)
                extra_toml += 'curve_secret_key = "keys/server.key_secret"\ncurve_clients_dir = "keys/clients"\n'
            else:
                extra_toml += "allow_plain_tcp = true\n"
        supervisor_values = {**SUPERVISOR_DEFAULTS, "flap_restarts": flap_restarts, **(supervisor or {})}
        self.config_path.write_text(TINY_TOML.format(
            mode=mode, readers=readers, commitlog=commitlog, cq=cq, broker_extra=broker_extra,
            supervisor="\n".join(f"{k} = {v}" for k, v in supervisor_values.items())) + extra_toml)
        self.log_path = root / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60) -> Broker:
        self.launch()
        self.wait_ready(timeout_s)
        return self

    def start_argv(self) -> list[str]:
        """``mqstore start`` on this broker's store and configuration."""
        remoting = ["--remoting", "off"] if self.remoting_port is None else [
            "--remoting", "on", "--remoting-port", str(self.remoting_port)]
        return [sys.executable, "-m", "scripts.cli.mqstore", "start", "--store", str(self.store),
                "--config", str(self.config_path), *remoting]

    def launch(self) -> Broker:
        """``mqstore start`` in the background, its output to ``log_path``; not waiting for anything."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child writes it for its whole life
        self.proc = subprocess.Popen(self.start_argv(), stdout=log, stderr=log, cwd=ROOT)
        log.close()
        return self

    def mqstore(self, *argv: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        """Another ``mqstore`` command, as a user runs it (``--store`` is added)."""
        return subprocess.run([sys.executable, "-m", "scripts.cli.mqstore", *argv, "--store", str(self.store)],
                              capture_output=True, text=True, cwd=ROOT, timeout=timeout_s)

    def endpoints(self, curve: CurveKeys | str | None = "client") -> Endpoints:
        """Where clients find this broker: its ipc sockets, or its TCP ports with ``curve`` (a client
        name in the broker's key directory, explicit keys, or None for none)."""
        if self.tcp_port is None:
            return Endpoints.for_store(self.store, self.readers)
        keys = CurveKeys.for_client(self.keys_dir, curve) if isinstance(curve, str) else curve
        return Endpoints.for_store(self.store, self.readers, tcp_host="127.0.0.1", tcp_base_port=self.tcp_port,
                                   curve=keys)

    def status(self) -> dict[str, Any] | None:
        try:
            return control_request(self.store, "status", timeout_ms=500)
        except ConnectionError:
            return None

    def wait_ready(self, timeout_s: float = 60) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"broker exited with {self.proc.returncode}:\n{self.logs()}")
            s = self.status()
            return s if s is not None and s.get("ready") else None
        return wait_for(ready, timeout_s, "the broker to be ready")  # type: ignore[no-any-return]

    def pid_of(self, actor: str) -> int:
        status = self.status()
        assert status is not None
        return int(status["actors"][actor]["pid"])

    def kill(self, actor: str, sig: int = signal.SIGKILL) -> int:
        pid = self.pid_of(actor)
        os.kill(pid, sig)
        return pid

    def wait_restarted(self, actor: str, old_pid: int, timeout_s: float = 30) -> None:
        def restarted() -> bool:
            s = self.status()
            if s is None:
                return False
            info = s["actors"][actor]
            return bool(info["pid"] != old_pid and info["state"] == "running")
        wait_for(restarted, timeout_s, f"{actor} to restart")

    def stop(self, timeout_s: float = 60) -> int:
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

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")[-20000:] if self.log_path.exists() else ""

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # the actors follow: each asked the kernel for SIGTERM when its parent dies
            self.proc.wait()
