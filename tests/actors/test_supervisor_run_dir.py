"""The supervisor's run directory is there when its sockets bind, whatever happened to it meanwhile."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.supervisor import Supervisor
from mqstore.ipc.transport.sockets import bind


def test_a_run_directory_removed_during_recovery_is_made_again_before_the_sockets_bind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a status poll that found no control socket removed the empty run directory it took
    for its own while the supervisor recovered the store; the control socket's bind then failed
    (ENOENT) and the broker exited."""
    base = tempfile.mkdtemp(prefix="mq")  # short: ipc socket paths are limited in length
    monkeypatch.setenv("XDG_RUNTIME_DIR", base)
    try:
        (tmp_path / "store").mkdir()
        supervisor = Supervisor(load_config(tmp_path / "store", None))
        monkeypatch.setattr(supervisor, "_recover", lambda: supervisor.endpoints.run_dir.rmdir())
        bound: list[str] = []

        def serve(ctx: zmq.Context[Any]) -> int:
            bind(ctx, zmq.REP, supervisor.endpoints.control).close(linger=0)
            bound.append(supervisor.endpoints.control)
            return 0
        monkeypatch.setattr(supervisor, "_serve", serve)
        assert supervisor._run_once() == 0 and bound
    finally:
        shutil.rmtree(base, ignore_errors=True)
