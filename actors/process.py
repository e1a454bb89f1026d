"""An actor process from start to exit.

``run_actor`` is the target the supervisor starts each process with (through its fork server): it logs to
stderr, dumps its threads' stacks there on SIGUSR1 (``dump_stacks_on_signal``), names the process by its
role (``name_process``: the title ``ps`` shows and the kernel's thread name), asks the kernel to end the
process with its supervisor, rebuilds the configuration from plain values, opens the process's
``Runtime``, ties SIGTERM and SIGINT to its stop flag, builds the named actor (``mqstore.actors.registry``)
and runs it until that flag is up. A fault exits non-zero, so the supervisor restarts the process.

Importing this module imports no actor: the registry imports a kind's module when it builds one.
"""

from __future__ import annotations

import cProfile
import ctypes
import faulthandler
import logging
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

import multiprocess
import psutil
import setproctitle

from mqstore.actors.config import BrokerConfig, log_level
from mqstore.actors.registry import build_actor
from mqstore.actors.runtime import Runtime

log = logging.getLogger("mqstore")
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
COMM_BYTES = 15  # the kernel keeps 16 bytes of a thread's name, its NUL included


def process_title(role: str, store_dir: str) -> str:
    """What ``ps`` shows for a broker process: ``mqstore: writer (STORE)``, ``mqstore: reader-1 (STORE)``."""
    return f"mqstore: {role} ({store_dir})"


def thread_name(role: str) -> str:
    """The kernel's name of the process (``/proc/PID/comm``, what ``top`` and plain ``pgrep`` match):
    ``mq-writer``, ``mq-reader-1``; the role whole, since ``mqstore: reader-1`` would be cut to 15
    bytes where the readers differ."""
    return f"mq-{role}"[:COMM_BYTES]


def name_process(role: str, store_dir: str) -> None:
    """Title the process by its role and store (its command line, as ``ps`` shows it) and name its
    main thread by its role alone."""
    setproctitle.setproctitle(process_title(role, store_dir))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(thread_name(role).encode()), 0, 0, 0)
    except (OSError, AttributeError):
        log.warning("cannot name the process's thread on this platform")


def setup_logging(name: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=log_level(),
                        format=f"%(asctime)s {name}[%(process)d] %(levelname)s %(message)s")


STACKS_SIGNAL = signal.SIGUSR1


def dump_stacks_on_signal() -> None:
    """``kill -USR1 PID`` writes every thread's Python stack to the process's stderr (the broker's log):
    what an actor is doing when it is slow, or does not stop. Armed first, so any process titled as an
    actor has it (``faulthandler``: written from the signal handler, whatever the threads hold)."""
    faulthandler.register(STACKS_SIGNAL, all_threads=True)


def on_stop_signals(stop: Callable[[], None]) -> None:
    """SIGTERM and SIGINT call ``stop``, which raises a flag: the loop ends its round, and nothing is
    cut off halfway through a write."""
    def handler(signum: int, frame: FrameType | None) -> None:
        stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def die_with_parent() -> None:
    """Stop (SIGTERM) when the supervisor dies, even by SIGKILL, so no actor outlives it.

    The supervisor starts its actors through a fork server (``mqstore.actors.supervisor``): an actor's
    parent is that server and the supervisor is its grandparent. The kernel sends SIGTERM when the
    parent dies (``PR_SET_PDEATHSIG``), which covers the server; the supervisor's own death is seen
    on the pipe it started the process through (``parent_process().sentinel`` reads end of file
    once nobody holds its other end), watched by a thread that sends the same SIGTERM.

    The request only covers a parent alive when it is made, and a supervisor killed while an actor
    starts up has already left it behind: so once both are armed, the process checks that it still
    hangs under the supervisor. An orphan must stop before it opens a file, or it keeps writing
    beside the next supervisor's actors."""
    supervisor = multiprocess.parent_process()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        log.warning("cannot ask to die with the supervisor on this platform")
    if supervisor is None or supervisor.pid is None:
        return  # not started by a supervisor (a test running it in process)
    threading.Thread(target=_stop_when_gone, args=(supervisor,), name="supervisor-watch", daemon=True).start()
    if not supervisor.is_alive() or not _under(supervisor.pid):
        os.kill(os.getpid(), signal.SIGTERM)


def _under(supervisor_pid: int) -> bool:
    """Whether this process's parent is the supervisor or a child of it (its fork server)."""
    parent_pid = os.getppid()
    if parent_pid == supervisor_pid:
        return True
    try:
        return bool(psutil.Process(parent_pid).ppid() == supervisor_pid)
    except psutil.Error:
        return False


def _stop_when_gone(supervisor: Any) -> None:
    supervisor.join()  # the parent process's join waits on its sentinel
    os.kill(os.getpid(), signal.SIGTERM)


DESCRIPTORS_BESIDE_FILES = 256  # sockets, pipes, logs and metadata files beside the store files a process holds
MAPPINGS_BESIDE_FILES = 1024    # the interpreter's, its libraries' and its heap's mappings beside the store files'
MAX_MAP_COUNT = "/proc/sys/vm/max_map_count"


def raise_open_files_limit(config: BrokerConfig, max_map_count: str = MAX_MAP_COUNT) -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (what ``ulimit -n`` allows without privileges)
    and warn plainly when it, or ``vm.max_map_count``, is too low for the store files this process may
    hold: every commitlog, consume-queue and index file found when the set of open files is unbounded,
    else its bound.
    Returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("cannot raise the open files limit from %d to %d", soft, hard)
    bound = config.broker.open_files_max or _store_file_count(config.store_dir)
    needed = bound + DESCRIPTORS_BESIDE_FILES
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning("the open files limit (ulimit -n) is %d, and this process may need %d for the store %s "
                    "(broker.open_files_max = %d): raise the hard limit or lower broker.open_files_max",
                    soft, needed, config.store_dir, config.broker.open_files_max)
    _check_map_count(bound + MAPPINGS_BESIDE_FILES, config, max_map_count)
    return int(soft)


def _check_map_count(needed: int, config: BrokerConfig, path: str = MAX_MAP_COUNT) -> None:
    """Each store file open is one mapping: warn plainly when ``vm.max_map_count`` is below what this
    process may map (past it, a mapping fails with ENOMEM)."""
    try:
        with open(path) as f:
            limit = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return  # not Linux, or not readable: nothing to say
    if limit < needed:
        log.warning("vm.max_map_count is %d, and this process may map %d for the store %s (broker.open_files_max "
                    "= %d): raise it (sysctl -w vm.max_map_count=%d) or lower broker.open_files_max",
                    limit, needed, config.store_dir, config.broker.open_files_max, needed)


def _store_file_count(store_dir: str) -> int:
    count = 0
    for family in ("commitlog", "consumequeue", "index"):
        for _, _, names in os.walk(os.path.join(store_dir, family)):
            count += len(names)
    return count


PROFILE_ENV = "MQSTORE_PROFILE"          # actor names (comma-separated, or ``all``) whose loop is profiled
PROFILE_DIR_ENV = "MQSTORE_PROFILE_DIR"  # where their profiles go (default: the temp directory)


def profile_path(name: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Where actor ``name`` writes a cProfile of its loop at stop, when ``MQSTORE_PROFILE`` names it
    (``writer,reader-0``; ``all``): ``{MQSTORE_PROFILE_DIR}/mqstore-{name}-{pid}.prof``, which
    ``python -m pstats`` reads. None: not profiled. Only the actor's own thread is profiled (ZeroMQ's
    I/O thread is C)."""
    wanted = {n.strip() for n in environ.get(PROFILE_ENV, "").split(",") if n.strip()}
    if name not in wanted and "all" not in wanted:
        return None
    directory = environ.get(PROFILE_DIR_ENV) or tempfile.gettempdir()
    return os.path.join(directory, f"mqstore-{name}-{os.getpid()}.prof")


def run_profiled(run: Callable[[], None], path: str | None) -> None:
    """``run()``, under cProfile when ``path`` is given: the profile is written when it returns (a stop),
    and when it raises. It counts the thread's CPU time, not the wall clock's: a poll that sleeps costs
    nothing, and a send that lets the woken peer run first is not charged for the peer's time."""
    if path is None:
        run()
        return
    profiler = cProfile.Profile(time.thread_time)
    try:
        profiler.runcall(run)
    finally:
        profiler.dump_stats(path)
        log.info("profile written to %s", path)


def run_actor(name: str, config_dict: dict[str, Any]) -> None:
    """Process entry point: build the actor and run it until SIGTERM; a fault exits non-zero so the
    supervisor restarts the process."""
    setup_logging(name)
    dump_stacks_on_signal()
    die_with_parent()
    name_process(name, str(config_dict["store_dir"]))
    config = BrokerConfig.from_dict(config_dict)
    raise_open_files_limit(config)
    runtime = Runtime.open(name, config)
    on_stop_signals(runtime.request_stop)
    try:
        actor = build_actor(name, runtime)
        runtime.report("running", force=True)
        run_profiled(actor.run, profile_path(name))
        runtime.report("stopped", force=True)
    except Exception:
        log.exception("%s failed", name)
        runtime.close()
        sys.exit(1)
    runtime.close()
