"""The supervisor's clean stop: the derived files are caught up by one store open, and the abort
marker goes only when that open's close has flushed them, so a crash during the catch-up leaves the
marker and the next start recovers abnormally."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from mqstore.actors.config import load_config
from mqstore.actors.supervisor import Supervisor
from mqstore.engine.log.message import Message
from mqstore.engine.meta.metafile import abort_exists, create_abort
from mqstore.engine.store import MessageStore

ROOT = Path(__file__).resolve().parents[2]
# a stopped broker's supervisor killed at the start of its catch-up open
DIE_IN_CATCH_UP = """
import os, signal, sys
from pathlib import Path
from mqstore.actors import supervisor
from mqstore.actors.config import load_config
from mqstore.engine.meta.metafile import create_abort

store = Path(sys.argv[1])
sup = supervisor.Supervisor(load_config(store, None))
sup._lock()
create_abort(store, os.getpid())

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

supervisor.MessageStore.open = killed
sup._finish(True)
"""


def _store_with_a_message(store: Path) -> None:
    with MessageStore.open(store) as opened:
        opened.put(Message("T", b"body"))


def test_abort_survives_a_crash_during_the_catch_up_open(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store_with_a_message(store)
    assert not abort_exists(store)
    died = subprocess.run([sys.executable, "-c", DIE_IN_CATCH_UP, str(store)], cwd=ROOT, check=False)
    assert died.returncode == -signal.SIGKILL
    assert abort_exists(store)  # the next start recovers abnormally


def test_a_clean_stop_removes_abort_after_the_catch_up(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _store_with_a_message(store)
    supervisor = Supervisor(load_config(store, None))
    supervisor._lock()
    create_abort(store, 1)  # the running broker's marker
    supervisor._finish(True)
    assert not abort_exists(store)
    with MessageStore.open(store) as reopened:
        assert not reopened.recovery.abnormal
