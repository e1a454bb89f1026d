"""An actor process from start to exit: it never outlives the supervisor that started it, even one
killed while the actor was still starting up; and its entry point loads no actor it does not run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import multiprocess
import psutil
import pytest

from mqstore.actors.config import load_config
from mqstore.actors.process import run_actor
from tests.integration.broker import wait_for

GEOMETRY = {"commitlog_file_size": 64 * 1024, "cq_entries_per_file": 64, "index_slot_count": 64,
            "index_entry_count": 256}


def _actor_once_orphaned(name: str, config_dict: dict[str, Any]) -> None:
    """``run_actor``, entered only after the process that started it is gone: a supervisor SIGKILLed
    in the second or so an actor spends importing before it can ask to die with its parent."""
    supervisor = multiprocess.parent_process()
    assert supervisor is not None
    supervisor.join(30)  # its sentinel: the parent process is gone
    run_actor(name, config_dict)


def _supervisor_killed_after_spawn(name: str, config_dict: dict[str, Any], pid_path: str, method: str) -> None:
    actor = multiprocess.get_context(method).Process(target=_actor_once_orphaned, args=(name, config_dict))
    actor.start()
    Path(pid_path).write_text(str(actor.pid))
    os.kill(os.getpid(), signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_actor_started_as_its_supervisor_was_killed_does_not_outlive_it(tmp_path: Path, method: str) -> None:
    """Started straight from the supervisor (spawn) or from its fork server (the supervisor's way),
    whose copy of the fork server's pipe keeps that server alive after the supervisor died."""
    # A consume-queue builder that outlived a killed tree kept applying dispatch from the next
    # tree's writer beside that tree's own builder: two writers of one queue's files, the new one
    # stuck on "File exists" for a file the orphan had created.
    run_dir = tempfile.mkdtemp(prefix="mq")  # short: ipc socket paths are limited in length
    config = load_config(tmp_path / "store", None, store={"geometry": GEOMETRY}, ipc={"run_dir": run_dir})
    config.endpoints.prepare()
    pid_path = tmp_path / "actor.pid"
    supervisor = multiprocess.get_context("spawn").Process(
        target=_supervisor_killed_after_spawn, args=("cqbuilder", config.to_dict(), str(pid_path), method))
    supervisor.start()
    supervisor.join(60)
    actor_pid = int(pid_path.read_text())
    try:
        assert supervisor.exitcode == -signal.SIGKILL
        wait_for(lambda: _gone(actor_pid), 30, "the orphaned actor to exit")
    finally:
        if not _gone(actor_pid):
            os.kill(actor_pid, signal.SIGKILL)
        shutil.rmtree(run_dir, ignore_errors=True)


def _printed_by(code: str) -> str:
    """What a fresh interpreter running ``code`` from the repository root prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2], timeout=60)
    return out.stdout.strip()


def test_the_entry_point_imports_no_actor_until_it_builds_one() -> None:
    """A spawned process imports ``mqstore.actors.process`` first: were the registry to import every actor,
    each process would load all of them (the writer, the readers, the front's asyncio) to run one."""
    code = ("import sys; import mqstore.actors.process; "
            "print(sorted(m for m in sys.modules if m.startswith('mqstore.actors.') and m not in "
            "('mqstore.actors.clock', 'mqstore.actors.config', 'mqstore.actors.config_ha', "
            "'mqstore.actors.config_listeners', 'mqstore.actors.process', "
            "'mqstore.actors.registry', 'mqstore.actors.runtime')))")
    assert _printed_by(code) == "[]"


def test_the_supervisors_main_module_imports_no_command() -> None:
    """Each actor imports the supervisor's main module (``mqstore start``'s, the CLI) as its own:
    were the CLI to import its commands up front, every actor would load them (the Spark jobs'
    modules, the benchmarks) and pay for it at each start."""
    code = ("import sys; import mqstore.scripts.cli.mqstore; "
            "print(sorted(m for m in sys.modules if m.startswith(('mqstore.pipeline', 'mqstore.scripts.cli.', "
            "'mqstore.scripts.bench'))"
            " and m != 'mqstore.scripts.cli.mqstore'))")
    assert _printed_by(code) == "[]"


_LIMITS = """
import logging, resource, sys
from pathlib import Path
from mqstore.actors.config import BrokerConfig
from mqstore.actors.process import raise_open_files_limit
logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(message)s")
resource.setrlimit(resource.RLIMIT_NOFILE, (100, int(sys.argv[3])))
config = BrokerConfig.from_dict({"store_dir": sys.argv[1], "broker": {"open_files_max": int(sys.argv[2])}})
print(raise_open_files_limit(config, *sys.argv[4:]), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def test_the_open_files_limit_is_raised_to_the_hard_one_and_a_low_one_is_said_plainly(tmp_path: Path) -> None:
    """An actor starts with the soft RLIMIT_NOFILE raised to the hard one; when even that is below
    what the store found may need (its files, with no bound on the open ones), it says so at start."""
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "consumequeue" / "T" / "0").mkdir(parents=True)
    for n in range(400):
        (tmp_path / "consumequeue" / "T" / "0" / f"{n:020d}").touch()

    def run(open_files_max: int, hard: int, *map_count: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-c", _LIMITS, str(tmp_path), str(open_files_max), str(hard),
                               *map_count],
                              capture_output=True, text=True, cwd=root, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(root)})
        assert done.returncode == 0, done.stderr
        return done

    bounded = run(64, 4096)
    assert bounded.stdout.split() == ["4096", "4096"] and "WARNING" not in bounded.stderr
    unbounded = run(0, 512)
    assert unbounded.stdout.split() == ["512", "512"]
    assert "the open files limit (ulimit -n) is 512, and this process may need 656" in unbounded.stderr


def test_a_max_map_count_too_low_for_the_store_is_said_plainly(tmp_path: Path) -> None:
    """Each open store file is a mapping: a ``vm.max_map_count`` below what the process may map (the
    store's 400 files, unbounded, and the interpreter's own) is said at start with the value to set."""
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "store" / "consumequeue" / "T" / "0").mkdir(parents=True)
    for n in range(400):
        (tmp_path / "store" / "consumequeue" / "T" / "0" / f"{n:020d}").touch()
    limits = {"low": tmp_path / "low", "high": tmp_path / "high"}
    limits["low"].write_text("1000\n")
    limits["high"].write_text("65530\n")
    said = {}
    for name, path in limits.items():
        done = subprocess.run([sys.executable, "-c", _LIMITS, str(tmp_path / "store"), "0", "4096", str(path)],
                              capture_output=True, text=True, cwd=root, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(root)})
        assert done.returncode == 0, done.stderr
        said[name] = done.stderr
    assert "vm.max_map_count is 1000, and this process may map 1424" in said["low"]
    assert "sysctl -w vm.max_map_count=1424" in said["low"]
    assert "max_map_count" not in said["high"]


def test_sigusr1_writes_every_threads_stack_to_stderr_and_the_actor_runs_on(tmp_path: Path) -> None:
    """What an actor that is slow to stop, or does not stop, is doing: ``kill -USR1`` writes its
    threads' Python stacks into its log, and costs it nothing else."""
    code = ("import sys, threading, time\n"
            "from mqstore.actors.process import dump_stacks_on_signal\n"
            "def waiting_in_the_stop_path(): time.sleep(120)\n"
            "dump_stacks_on_signal()\n"
            "threading.Thread(target=waiting_in_the_stop_path, daemon=True).start()\n"
            "print('armed', flush=True); sys.stdin.read()\n")
    err = tmp_path / "stderr"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=stderr, cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"armed\n"
        proc.send_signal(signal.SIGUSR1)
        stacks = wait_for(lambda: "waiting_in_the_stop_path" in err.read_text() and err.read_text(), 30,
                          "the stacks in stderr")
        assert "most recent call first" in stacks and "in <module>" in stacks  # the main thread's too
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
