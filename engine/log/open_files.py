"""A process's bounded set of open store files: the descriptors and mappings kept for the files in
use, let go when idle, when deleted, and when more than ``max_open`` are open.

Without it a process keeps a mapping (and a descriptor) of every file it ever touched until the
file is deleted and the process happens to look again, so descriptors and mappings grow with the
store (two per commitlog file, one per consume-queue file), and a file retention deleted keeps its
blocks on disk for as long as anyone holds it.

What is held is anything with a ``used`` flag, ``release`` and ``deleted`` (``Held``): a mapped file
(``mqstore.engine.log.mapped_file``, mapped again on its next use), an index file's mapping
(``mqstore.engine.keyindex.index_map``), or a descriptor the flush service syncs through. A file
mapped again is checked to be the one let go (``mqstore.engine.log.file_identity``). Order is by
use, approximated the way a clock does it: every use sets ``used``, a ``sweep`` clears it, and what
was not used between two sweeps is idle:

- ``sweep`` (the owning actor calls it between its rounds, every idle period) lets go of everything
  idle and of everything whose file was deleted or replaced, then tells the watched queues
  (``Watched.forget_gone``) to forget the leading files that are gone;
- opening one more than ``max_open`` lets go of the oldest idle ones at once; what was used since
  the last sweep stays (a round's reads may still hold it), so between sweeps the set is bounded by
  ``max_open`` plus the files the round uses.

A mapping is borrowed while a view into it exists (a memoryview, a numpy array, a C kernel's
``Py_buffer``): ``release`` then fails (``mmap.close`` raises ``BufferError``) and the file stays
until a later sweep finds it free. A caller holding the ``mmap`` object itself (not a view) holds no
borrow: it must not keep it past the round, since only a round's own uses are safe from eviction.

``guard`` wraps every letting go, for a process with a thread that uses a mapping without the
GIL (the writer's prefault thread): it keeps that thread off the mappings meanwhile.
"""

from __future__ import annotations

import contextlib
import mmap
import weakref
from collections.abc import Callable
from typing import Protocol


def unmap(mm: mmap.mmap) -> bool:
    """Close a mapping; False while a view of it is out (borrowed: the caller keeps it for a later try)."""
    try:
        mm.close()
    except BufferError:
        return False
    return True


class Held(Protocol):
    used: bool  # set on every use, cleared by a sweep

    def release(self) -> bool:
        """Close the descriptor and mapping (the holder opens them again on its next use); False
        while borrowed."""
        ...

    def deleted(self) -> bool:
        """Whether the file was deleted, or another file made at its path, since it was opened."""
        ...


class Watched(Protocol):
    def forget_gone(self) -> None:
        """Drop the leading files found deleted."""
        ...


class OpenFiles:
    def __init__(self, max_open: int = 0) -> None:
        self.max_open = max_open  # 0: no bound (only idle and deleted files are let go)
        self.guard: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext
        self._held: dict[Held, None] = {}  # in the order opened
        self._watched: weakref.WeakSet[Watched] = weakref.WeakSet()
        self.released = 0      # let go of in all, for an actor's status
        self.deleted_seen = 0  # of which found deleted

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, item: Held) -> bool:
        return item in self._held

    def watch(self, owner: Watched) -> None:
        """``owner`` forgets its leading deleted files after a sweep that found one (held weakly)."""
        self._watched.add(owner)

    def opened(self, item: Held) -> None:
        item.used = True
        self._held[item] = None
        if self.max_open and len(self._held) > self.max_open:
            with self.guard():
                self._evict()

    def closed(self, item: Held) -> None:
        """``item`` was closed by its owner: it is no longer held."""
        self._held.pop(item, None)

    def _evict(self) -> None:
        for item in list(self._held):
            if len(self._held) <= self.max_open:
                return
            if not item.used and item.release():
                del self._held[item]
                self.released += 1

    def sweep(self) -> int:
        """Let go of what was not used since the last sweep and of what was deleted; returns how
        many were let go."""
        released = 0
        gone = False
        with self.guard():
            for item in list(self._held):
                deleted = item.deleted()
                if not deleted and item.used:
                    item.used = False
                    continue
                if item.release():
                    del self._held[item]
                    released += 1
                    gone |= deleted
                    self.deleted_seen += deleted
        self.released += released
        if gone:
            for owner in list(self._watched):
                owner.forget_gone()
        return released
