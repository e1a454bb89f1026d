"""The store's writer lock: an flock on ``{store}/lock``, held by the one process that may write the
store (a broker's supervisor, an embedded ``MessageStore``, a rebuild) for as long as it has it open.

Linux lists every flock in ``/proc/locks`` with the pid that took it and the locked file's device and
inode, so a process that finds the lock taken can say who holds it; elsewhere (or when the holder let
go meanwhile) the holder is "another process".
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from mqstore.engine.errors import MqstoreError

LOCK_FILE_NAME = "lock"
PROC_LOCKS = Path("/proc/locks")


class StoreLockedError(MqstoreError, RuntimeError):
    """Another process has this store open for writing."""


def lock_store(store_dir: Path) -> int:
    """Take the store's writer lock; the descriptor holds it until closed. Raises StoreLockedError
    naming the holder when another process (a broker, a rebuild) has it."""
    fd = os.open(store_dir / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreLockedError(f"{store_dir} is in use by {holder_name(store_dir)}") from None
    return fd


def holder_name(store_dir: Path) -> str:
    """``pid N`` for the process holding the store's lock, or ``another process``."""
    pid = lock_holder(store_dir)
    return f"pid {pid}" if pid is not None else "another process"


def lock_holder(store_dir: Path, proc_locks: Path = PROC_LOCKS) -> int | None:
    """The pid that holds the flock on ``{store}/lock``, or None (nobody, or no way to tell)."""
    try:
        st = os.stat(store_dir / LOCK_FILE_NAME)
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
