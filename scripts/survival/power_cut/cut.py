"""The cut: a broker under load, its whole process tree frozen at a random moment, the live store
and the recorder's record copied while nothing moves, then the tree killed.

Each cut runs a broker on a fresh store. A restart on the durable image of the previous cut costs
the same (a broker start and a recovery of a store of a few files either way), but its oracle would
have to carry what that image kept of the previous load; a fresh store keeps every cut's oracle to
its own load. The images per minute come instead from building several crash images out of one cut
(``mqstore.scripts.survival.power_cut.command``): the cut costs a broker start and a few seconds of load, an
image costs only its recovery and its check.

- ``Recorder``: what records the durable bytes. ``shim`` is the ``LD_PRELOAD`` recorder
  (``mqstore.scripts.survival.power_cut.shim``, ``images``); ``live`` is a stand-in that takes the live copy
  as the durable image (every written byte survives, as in a SIGKILL of the tree): it checks the
  workload and the oracle, not durability.
- ``freeze``: SIGSTOP to every process of a tree, again until no new child appears.
- ``cut``: the whole run of one cut, returning where its copies are.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

from mqstore.scripts.harness import ROOT, wait_for
from mqstore.scripts.survival.power_cut.workload import Journal, broker_for

FIRST_SENDS = 20          # acknowledged sends before the load's clock starts
LOAD_S = (0.3, 3.0)       # how long the load runs before the cut, drawn uniformly


class Recorder(Protocol):
    name: str

    def env(self, record_dir: Path, root: Path) -> dict[str, str]: ...

    def baseline(self, root: Path, record_dir: Path) -> None: ...

    def crash_image(self, record_dir: Path, live: Path, out: Path, rng: random.Random) -> Any: ...

    def durable_image(self, record_dir: Path, live: Path, out: Path) -> Any: ...


class LiveCopyRecorder:
    """The stand-in: nothing recorded, the live copy is the durable image and every crash image."""

    name = "live"

    def env(self, record_dir: Path, root: Path) -> dict[str, str]:
        return {}

    def baseline(self, root: Path, record_dir: Path) -> None:
        pass

    def crash_image(self, record_dir: Path, live: Path, out: Path, rng: random.Random) -> Any:
        shutil.copytree(live, out)
        return {"live_copy": True}

    def durable_image(self, record_dir: Path, live: Path, out: Path) -> Any:
        shutil.copytree(live, out)
        return {"live_copy": True}


class ShimRecorder:
    """The ``LD_PRELOAD`` recorder: every sync of a file under the store copied into the record."""

    name = "shim"

    def __init__(self) -> None:
        from mqstore.scripts.survival.power_cut import images, shim
        self.shim, self.images = shim, images
        self.library = shim.build()

    def env(self, record_dir: Path, root: Path) -> dict[str, str]:
        return dict(self.shim.env_for(record_dir, root))

    def baseline(self, root: Path, record_dir: Path) -> None:
        self.shim.baseline(root, record_dir)

    def crash_image(self, record_dir: Path, live: Path, out: Path, rng: random.Random) -> Any:
        return self.images.crash_image(record_dir, live, out, rng)

    def durable_image(self, record_dir: Path, live: Path, out: Path) -> Any:
        return self.images.durable_image(record_dir, live, out)


def recorder_named(name: str) -> Recorder:
    return ShimRecorder() if name == "shim" else LiveCopyRecorder()


def shim_available() -> bool:
    try:
        from mqstore.scripts.survival.power_cut import images, shim  # noqa: F401
    except ImportError:
        return False
    return True


def freeze(pid: int) -> list[psutil.Process]:
    """SIGSTOP ``pid`` and every descendant; a child spawned meanwhile is caught by the next round."""
    stopped: dict[int, psutil.Process] = {}
    while True:
        try:
            tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        fresh = [p for p in tree if p.pid not in stopped]
        if not fresh:
            return list(stopped.values())
        for p in fresh:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.suspend()
                stopped[p.pid] = p


@dataclass(frozen=True, slots=True)
class CutCopy:
    """One cut's copies: the live store and the record as they were with the tree frozen."""

    root: Path
    mode: str
    seed: int
    live: Path
    record: Path
    journal: Journal
    load_s: float
    processes: int

    def describe(self) -> dict[str, Any]:
        return {"cut": self.root.name, "mode": self.mode, "seed": self.seed, "load_s": round(self.load_s, 2),
                "processes_frozen": self.processes, **self.journal.summary()}


def cut(root: Path, mode: str, seed: int, recorder: Recorder) -> CutCopy:
    """Run a broker under load on a fresh store in ``root`` and cut its power at a random moment."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    logs, record = root / "logs", root / "record"
    logs.mkdir()
    record.mkdir()
    broker = broker_for(root, mode)
    broker.store.mkdir()
    recorder.baseline(broker.store, record)
    broker.extra_env = recorder.env(record, broker.store)
    load: subprocess.Popen[bytes] | None = None
    try:
        broker.start()
        with open(root / "load.log", "ab") as out:
            load = subprocess.Popen([sys.executable, "-m", "mqstore.scripts.survival.power_cut.workload",
                                     str(broker.store), str(logs), str(seed)], cwd=ROOT, stdout=out, stderr=out)
        wait_for(lambda: _acked(logs) >= FIRST_SENDS, 60, "the load's first sends", interval_s=0.05)
        load_s = rng.uniform(*LOAD_S)
        time.sleep(load_s)  # the cut's moment: a random instant of the load, not a condition to wait for
        assert broker.proc is not None
        frozen = freeze(broker.proc.pid)
        shutil.copytree(broker.store, root / "live")
        shutil.copytree(record, root / "record-at-cut")
        for p in frozen:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        broker.proc.wait()
        broker.proc = None
        psutil.wait_procs(frozen, timeout=30)
    finally:
        if load is not None:
            load.kill()
            load.wait()
        broker.__exit__()
    return CutCopy(root, mode, seed, root / "live", root / "record-at-cut", Journal.read(logs), load_s, len(frozen))


def _acked(logs: Path) -> int:
    path = logs / "plain.log"
    return sum(line.startswith("ok\t") for line in path.read_text().splitlines()) if path.exists() else 0
