"""Who holds a store: the supervisor takes the store's lock for the broker's whole life, and a start
that finds it taken says by which process, before it probes ports or starts anything.

The lock is ``engine.store.lock_store``'s flock on ``{store}/lock``. Linux lists every flock in
``/proc/locks`` with the pid that took it and the locked file's device and inode, which is where the
holder's pid comes from; elsewhere (or when the holder let go meanwhile) it is "another process".
"""

from __future__ import annotations

import os
from pathlib import Path

from engine import StoreLockedError
from engine.store import lock_store

PROC_LOCKS = Path("/proc/locks")


def hold_store(store_dir: Path) -> int:
    """Take the store's lock (making the directory when missing); the descriptor holds it until
    closed. Raises StoreLockedError naming the holder when another process has it."""
    store_dir.mkdir(parents=True, exist_ok=True)
    try:
        return lock_store(store_dir)
    except StoreLockedError:
        raise StoreLockedError(in_use_message(store_dir)) from None


def check_store_free(store_dir: Path) -> None:
    """Raise StoreLockedError naming the holder when another process holds the store. Takes the lock
    and lets it go at once; creates nothing (a store without a lock file has never been opened)."""
    if (store_dir / "lock").exists():
        os.close(hold_store(store_dir))


def in_use_message(store_dir: Path) -> str:
    pid = lock_holder(store_dir)
    holder = f"pid {pid}" if pid is not None else "another process"
    return (f"{store_dir} is in use by {holder}, a broker or a tool that opened it "
            f"(mqstore stop --store {store_dir} stops a broker)")


def lock_holder(store_dir: Path, proc_locks: Path = PROC_LOCKS) -> int | None:
    """The pid that holds the flock on ``{store}/lock``, or None (nobody, or no way to tell)."""
    try:
        st = os.stat(store_dir / "lock")
        lines = proc_locks.read_text().splitlines()
    except OSError:
        return None
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2148124 0 EOF"; a waiter's line has "->" after the number
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted and fields[4].isdigit():
            return int(fields[4])
    return None
