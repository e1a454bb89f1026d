"""The supervisor starts its actors through a fork server (``mqstore.actors.supervisor``). That server dying
alone takes its actors with it (each asked the kernel for SIGTERM when its parent dies); the
supervisor, which learns of their exits from that server, sees them all dead at once: it ends any
that is still stopping before it starts its replacement, so no role ever runs twice."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest

from mqstore.ipc.client.api import Consumer, Producer
from tests.integration.broker import Broker, wait_for


def _fork_server(supervisor_pid: int) -> psutil.Process:
    servers = [p for p in psutil.Process(supervisor_pid).children()
               if "multiprocess.forkserver" in " ".join(p.cmdline())]
    assert len(servers) == 1, servers
    return servers[0]


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def _role_pids(store: Path, roles: set[str]) -> dict[str, list[int]]:
    """Every live process titled as one of the broker's roles on ``store``."""
    pids: dict[str, list[int]] = {}
    for p in psutil.process_iter(["cmdline"]):
        line = " ".join(p.info["cmdline"] or []).strip()
        for role in roles:
            if line == f"mqstore: {role} ({store})":
                pids.setdefault(role, []).append(p.pid)
    return pids


@pytest.mark.slow
def test_fork_server_killed_alone_every_actor_restarts_once(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker, Producer(broker.store) as producer:
        assert producer.send("Before", b"one").ok
        status = broker.status()
        assert status is not None and broker.proc is not None
        store, old = status["store"], {name: int(info["pid"]) for name, info in status["actors"].items()}
        server = _fork_server(broker.proc.pid)
        os.kill(server.pid, signal.SIGKILL)

        def restarted() -> bool:
            s = broker.status()
            return s is not None and bool(s["ready"]) and all(
                int(s["actors"][name]["pid"]) != pid for name, pid in old.items())
        wait_for(restarted, 60, "every actor to restart and the broker to serve again")
        wait_for(lambda: all(_gone(pid) for pid in old.values()), 30, "the old actors to be gone")
        assert {role: len(pids) for role, pids in _role_pids(Path(store), set(old)).items()} == dict.fromkeys(old, 1)
        assert _fork_server(broker.proc.pid).pid != server.pid
        assert producer.send("After", b"two").ok
        with Consumer(broker.store, group="G", topic="After", start="earliest", long_poll_ms=200) as consumer:
            got = wait_for(lambda: consumer.poll(1000), 30, "the message sent after the restart")
        assert [m.body for m in got] == [b"two"]
        assert broker.stop() == 0
