"""The store's writer lock names its holder for every opener, not only for a broker's start: an
embedded MessageStore, the offline commands and a rebuild said "another process"."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.engine import MessageStore, StoreLockedError

ROOT = Path(__file__).resolve().parents[3]
HOLD = "import sys; from pathlib import Path; from mqstore.engine.meta.store_lock import lock_store; " \
       "lock_store(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()"

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(),
                                reason="the kernel lists flocks in /proc/locks on Linux")


@pytest.fixture
def held_store(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A store whose lock a real other process holds, and that process's pid."""
    store = tmp_path / "store"
    MessageStore.open(store).close()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(store)], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield store, holder.pid
    finally:
        holder.communicate("")  # stdin closed: it exits, and the lock goes with it


def test_opening_a_held_store_names_the_holder(held_store: tuple[Path, int]) -> None:
    store, pid = held_store
    with pytest.raises(StoreLockedError, match=f"^{store} is in use by pid {pid}$"):
        MessageStore.open(store)


def test_mqstore_query_on_a_held_store_names_the_holder(held_store: tuple[Path, int]) -> None:
    store, pid = held_store
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "query", str(store), "--topic", "T",
                           "--key", "k"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"{store} is in use by pid {pid}; stop it, or use 'mqstore inspect'" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
