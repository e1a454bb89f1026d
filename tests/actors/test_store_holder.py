"""Who holds a store: the pid the kernel lists for the flock on ``{store}/lock``, found for a lock
taken by another real process, and the error a second broker gets instead of starting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.actors.store_holder import check_store_free, hold_store
from mqstore.engine import StoreLockedError
from mqstore.engine.meta.store_lock import lock_holder

ROOT = Path(__file__).resolve().parents[2]
HOLD = "import sys; from pathlib import Path; from mqstore.engine.meta.store_lock import lock_store; " \
       "lock_store(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()"


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="the kernel lists flocks in /proc/locks on Linux")
def test_a_store_held_by_another_process_names_its_pid(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    check_store_free(store)
    assert not (store / "lock").exists()  # checking creates nothing
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(store)], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert lock_holder(store) == holder.pid
        for attempt in (check_store_free, hold_store):
            with pytest.raises(StoreLockedError, match=f"in use by pid {holder.pid},"):
                attempt(store)
    finally:
        holder.communicate("")  # stdin closed: it exits, and the lock goes with it
    assert lock_holder(store) is None
    check_store_free(store)
    os.close(hold_store(store))


def test_only_a_granted_flock_on_that_file_counts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "lock").touch()
    st = os.stat(store / "lock")
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    proc_locks = tmp_path / "locks"
    proc_locks.write_text(f"1: POSIX  ADVISORY  WRITE 11 {where} 0 EOF\n"
                          f"2: FLOCK  ADVISORY  WRITE 22 {where}9 0 EOF\n"
                          f"2: -> FLOCK  ADVISORY  WRITE 33 {where} 0 EOF\n")
    assert lock_holder(store, proc_locks) is None
    proc_locks.write_text(proc_locks.read_text() + f"3: FLOCK  ADVISORY  WRITE 44 {where} 0 EOF\n")
    assert lock_holder(store, proc_locks) == 44
    assert lock_holder(tmp_path / "nowhere", proc_locks) is None
