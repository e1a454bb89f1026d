"""The failover tests' cluster: brokers of one broker name on this machine, each front a NameServer
listed by every broker (so routes survive the loss of any one machine), and the stock RocketMQ client
(``mqstore.scripts.bench.rocketmq_peer``) run beside them in its own processes, its JSON lines read
while it runs."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import DecodeKind
from mqstore.ipc.remoting import codec as rm
from tests.integration.broker import Broker, free_port_range, wait_for

ROOT = Path(__file__).resolve().parents[2]
COMMITLOG = 256 * 1024
TOPIC = "Failover"
BROKER_NAME = "broker-a"
EXPIRE_MS = 3_000  # a lost broker leaves the routes this soon (RocketMQ's 120 s would outlast a test)
# below the stock client's 3 s send timeout: a send in flight when the slave is lost is answered
# FLUSH_SLAVE_TIMEOUT, not timed out by the client (which then keeps the broker out of its queues)
SLAVE_TIMEOUT_MS = 1_000
# the stock C++ client (1.2.3) can hang for good in a send whose connection its broker's death cut:
# a producer silent this long is such a hang, not a wait (its sends time out in 3 s, three tries)
STUCK_S = 20.0


@dataclass
class Node:
    """One broker of the cluster: its remoting port, and its HA port right above it (RocketMQ's)."""

    broker: Broker
    port: int

    @property
    def ha(self) -> str:
        return f"127.0.0.1:{self.port + 1}"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


def node(root: Path, port: int, namesrv: str, *, role: str = "SYNC_MASTER", broker_id: int = 0,
         master_ha: str = "") -> Node:
    """A broker named ``BROKER_NAME`` registering with every NameServer in ``namesrv``: a master of
    ``role`` (in_sync_replicas 2), or a SLAVE of ``master_ha`` with ``broker_id``."""
    root.mkdir(exist_ok=True)
    toml = (f'\n[remoting]\nbroker_name = "{BROKER_NAME}"\nnamesrv = "{namesrv}"\nregister_interval_ms = 500\n'
            f"broker_expire_ms = {EXPIRE_MS}\n"
            f"\n[ha]\nlisten_port = {port + 1}\nin_sync_replicas = 2\nslave_timeout_ms = {SLAVE_TIMEOUT_MS}\n"
            "metadata_sync_interval_ms = 500\n")
    broker = Broker(root, commitlog=COMMITLOG, remoting_port=port, extra_toml=toml,
                    broker_extra=f'role = "{role}"' if master_ha == "" else "")
    if master_ha:
        broker.start_args += ("--role", "SLAVE", "--broker-id", str(broker_id), "--master", master_ha)
    return Node(broker, port)


def ports(count: int) -> list[int]:
    """``count`` remoting ports, each with its HA port (+1) free, below the kernel's ephemeral range: a
    slave's HA port stays unbound until its promotion, and meanwhile an outgoing connection of any
    process could take it as its local port (the promoted HA actor then fails with EADDRINUSE)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    chosen: list[int] = []
    for base in random.sample(range(10_000, low - 2, 2), 200):
        if _bindable(base) and _bindable(base + 1):
            chosen.append(base)
            if len(chosen) == count:
                return chosen
    return [free_port_range(2) for _ in range(count)]  # nothing free below it: take the harness's


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def namesrv_of(port_list: Iterable[int]) -> str:
    return ";".join(f"127.0.0.1:{p}" for p in port_list)


def cluster_info(port: int) -> dict[str, Any] | None:
    try:
        with rm.RemotingClient("127.0.0.1", port, timeout_s=3) as client:
            reply = client.call(rm.GET_BROKER_CLUSTER_INFO)
    except OSError:
        return None
    return json.loads(reply.body) if reply.code == rm.SUCCESS else None


def members(port: int) -> dict[int, str]:
    """Broker id -> address of ``BROKER_NAME`` as the NameServer at ``port`` lists it."""
    info = cluster_info(port)
    if info is None or BROKER_NAME not in info["brokerAddrTable"]:
        return {}
    return {int(i): a for i, a in info["brokerAddrTable"][BROKER_NAME]["brokerAddrs"].items()}


def wait_members(port_list: Iterable[int], want: dict[int, str], timeout_s: float = 60) -> None:
    for port in port_list:
        wait_for(lambda p=port: members(p) == want, timeout_s, f"the NameServer at {port} to list {want}")


def written(broker: Broker) -> int:
    """The broker's log end: a master's writer's, a slave's HA actor's."""
    status = broker.status()
    if status is None:
        return -1
    if "ha" in status["actors"] and status.get("role") == "SLAVE":
        return int(status["actors"]["ha"].get("written", -1))
    return int(status.get("written", -1))


def log_bytes(commitlog_dir: Path, end: int) -> bytes:
    data = bytearray()
    for path in sorted(commitlog_dir.iterdir()):
        if path.name.isdigit():
            data += path.read_bytes()
    return bytes(data[:end])


def uniq_keys(commitlog_dir: Path, from_phys: int) -> list[str]:
    """The message ids of the whole records in a commitlog from ``from_phys`` on (read only)."""
    commitlog = CommitLog.open(commitlog_dir, COMMITLOG, writable=False)
    try:
        return [str(d.record.uniq_key) for _, d in commitlog.scan(from_phys)
                if d.kind is DecodeKind.RECORD and d.record is not None]
    finally:
        commitlog.close()


@dataclass
class Peer:
    """A stock client process running beside the test, its JSON lines in ``out``."""

    proc: subprocess.Popen[bytes]
    out: Path
    stopped: bool = field(default=False)

    @classmethod
    def start(cls, home: Path, name: str, *args: object) -> Peer:
        out = home / f"{name}.jsonl"
        with open(out, "wb") as sink:
            proc = subprocess.Popen([sys.executable, "-m", "mqstore.scripts.bench.rocketmq_peer", *map(str, args)],
                                    cwd=ROOT, env={**os.environ, "HOME": str(home)}, stdout=sink,
                                    stderr=subprocess.DEVNULL)
        return cls(proc, out)

    def lines(self) -> list[dict[str, Any]]:
        text = self.out.read_text()
        complete = text[:text.rfind("\n") + 1]  # a line still being written is left for the next look
        return [json.loads(line) for line in complete.splitlines() if line.startswith("{")]

    def oks(self) -> list[dict[str, Any]]:
        return [r for r in self.lines() if r.get("status") == "OK"]

    def stop(self) -> list[dict[str, Any]]:
        if not self.stopped:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.stopped = True
        return self.lines()


class StockProducer:
    """The stock producer sending ``--forever`` to ``TOPIC`` through the NameServers ``ns``, started
    again with the same addresses when it hangs (``STUCK_S``); ``lines`` are every run's, in order."""

    def __init__(self, home: Path, ns: str) -> None:
        self.home = home
        self.ns = ns
        self.runs: list[Peer] = []
        self._start()

    def _start(self) -> None:
        self.runs.append(Peer.start(self.home, f"produce-{len(self.runs)}", "produce", self.ns, TOPIC, 0,
                                    "--forever"))

    @property
    def restarts(self) -> int:
        return len(self.runs) - 1

    def lines(self) -> list[dict[str, Any]]:
        running = self.runs[-1]
        if not running.stopped and time.time() - running.out.stat().st_mtime > STUCK_S:
            running.stop()
            self._start()
        return [line for run in self.runs for line in run.lines()]

    def oks(self) -> list[dict[str, Any]]:
        return [r for r in self.lines() if r.get("status") == "OK"]

    def stop(self) -> list[dict[str, Any]]:
        self.runs[-1].stop()
        return [line for run in self.runs for line in run.lines()]


def peer(home: Path, *args: object, timeout_s: float = 120) -> list[dict[str, Any]]:
    """Run the stock client to its end; its JSON lines."""
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.bench.rocketmq_peer", *map(str, args)], cwd=ROOT,
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
