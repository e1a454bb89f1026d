"""Who holds a store: the supervisor takes the store's lock for the broker's whole life, and a start
that finds it taken says by which process, before it probes ports or starts anything.

The lock and the way to its holder's pid are ``mqstore.engine.meta.store_lock``'s; this module adds what a broker
says about it (how to stop the holder when it is a broker).
"""

from __future__ import annotations

import os
from pathlib import Path

from mqstore.engine.meta.metafile import make_dirs
from mqstore.engine.meta.store_lock import StoreLockedError, holder_name, lock_store


def hold_store(store_dir: Path) -> int:
    """Take the store's lock (making the directory when missing); the descriptor holds it until
    closed. Raises StoreLockedError naming the holder when another process has it."""
    make_dirs(store_dir)
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
    return (f"{store_dir} is in use by {holder_name(store_dir)}, a broker or a tool that opened it "
            f"(mqstore stop --store {store_dir} stops a broker)")
