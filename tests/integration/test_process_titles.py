"""Every broker process is named by its role, as ``ps``, ``top`` and ``pgrep`` see it: the command
line (``/proc/PID/cmdline``) reads ``mqstore: ROLE (STORE)`` and the kernel's name
(``/proc/PID/comm``) ``mq-ROLE``, where all of them showed ``python3 -B -c from multiprocess...``."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.actors.process import thread_name
from tests.integration.broker import Broker


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


@pytest.mark.slow
def test_ps_shows_each_actor_by_role_and_store(tmp_path: Path) -> None:
    with Broker(tmp_path, readers=2) as broker:
        status = broker.status()
        assert status is not None
        store = status["store"]
        roles = {"supervisor": int(status["pid"])} | {name: int(info["pid"]) for name, info in status["actors"].items()}
        assert {"writer", "flusher", "cqbuilder", "indexbuilder", "reader-0", "reader-1"} <= set(roles)
        for role, pid in roles.items():
            assert _cmdline(pid) == f"mqstore: {role} ({store})"
            assert _comm(pid) == thread_name(role)
        assert _comm(roles["reader-1"]) == "mq-reader-1"
        assert _comm(roles["indexbuilder"]) == "mq-indexbuilder"  # 15 bytes, the kernel's limit
        assert broker.stop() == 0
