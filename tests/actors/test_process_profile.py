"""``MQSTORE_PROFILE``: an actor named there writes a cProfile of its loop, in CPU time, when it stops."""

from __future__ import annotations

import glob
import os
import pstats
import time
from pathlib import Path

import pytest

from mqstore.actors.process import profile_path, run_profiled
from mqstore.ipc.client.api import Admin
from tests.integration.broker import Broker


def test_profile_path_names_the_actors_asked_for(tmp_path: Path) -> None:
    env = {"MQSTORE_PROFILE": "writer, reader-1", "MQSTORE_PROFILE_DIR": str(tmp_path)}
    assert profile_path("writer", env) == str(tmp_path / f"mqstore-writer-{os.getpid()}.prof")
    assert profile_path("reader-1", env) is not None
    assert profile_path("reader-0", env) is None
    assert profile_path("writer", {}) is None
    assert profile_path("flusher", {"MQSTORE_PROFILE": "all", "MQSTORE_PROFILE_DIR": str(tmp_path)}) is not None


def _spin_then_sleep() -> None:
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:
        pass
    time.sleep(0.3)


def test_run_profiled_counts_cpu_not_sleep(tmp_path: Path) -> None:
    path = str(tmp_path / "p.prof")
    run_profiled(_spin_then_sleep, path)
    stats = pstats.Stats(path)
    total_s = stats.total_tt  # type: ignore[attr-defined]
    assert 0.04 <= total_s < 0.3, "a sleep is no CPU: a wall-clock profile would count it"


def test_run_profiled_writes_when_the_loop_raises(tmp_path: Path) -> None:
    def fail() -> None:
        raise RuntimeError("boom")

    path = tmp_path / "p.prof"
    with pytest.raises(RuntimeError):
        run_profiled(fail, str(path))
    assert path.exists()


def test_a_broker_writes_the_profiles_asked_for_at_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "profiles"
    out.mkdir()
    monkeypatch.setenv("MQSTORE_PROFILE", "writer,cqbuilder")
    monkeypatch.setenv("MQSTORE_PROFILE_DIR", str(out))
    broker = Broker(tmp_path).start()
    try:
        with Admin(broker.store) as admin:
            admin.create_topic("Prof", 1)
    finally:
        broker.stop()
    written = sorted(Path(p).name.rsplit("-", 1)[0] for p in glob.glob(str(out / "*.prof")))
    assert written == ["mqstore-cqbuilder", "mqstore-writer"]
    writer = pstats.Stats(glob.glob(str(out / "mqstore-writer-*.prof"))[0])
    assert any(name == "run" and "writer" in file for file, _, name in writer.stats)  # type: ignore[attr-defined]
