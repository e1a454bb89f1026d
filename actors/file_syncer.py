"""The flush service's descriptors (``FileSyncer``): each file it syncs held open while it is synced, so
each flush is just fsync or msync calls, and let go when idle or deleted (the process's ``open_files``
sweep), and a commitlog file at once when synced to its end. A failed fsync or msync propagates: the
service dies rather than claim durability.
"""

from __future__ import annotations

import os
from pathlib import Path

from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.log.range_sync import RangeSync


class _Synced:
    """A file the flush service syncs, held in the process's open files: its descriptor, or for a
    commitlog file its range mapping (which holds a descriptor of its own)."""

    def __init__(self, held: dict[Path, _Synced], path: Path, fd: int, ranged: RangeSync | None) -> None:
        self._held = held
        self.path = path
        self.fd = fd
        self.ranged = ranged
        self.used = True

    def release(self) -> bool:
        if self.fd >= 0:
            if self.ranged is not None:
                self.ranged.close()
            else:
                os.close(self.fd)
            self.fd = -1
        if self._held.get(self.path) is self:
            del self._held[self.path]
        return True

    def deleted(self) -> bool:
        return self.fd < 0 or os.fstat(self.fd).st_nlink == 0


class FileSyncer:
    """Descriptors (and the commitlog's range mappings) kept open per file while it is synced, so
    each flush is just fsync or msync calls; let go when idle or deleted (``open_files``' sweep), and
    a commitlog file at once when synced to its end."""

    def __init__(self, open_files: OpenFiles | None = None) -> None:
        self.open_files = open_files if open_files is not None else OpenFiles()
        self._fds: dict[Path, _Synced] = {}
        self._ranges: dict[Path, _Synced] = {}

    def _held(self, table: dict[Path, _Synced], path: Path) -> _Synced | None:
        held = table.get(path)
        if held is not None and held.deleted():  # unlinked: the path may name a new file by now
            self.open_files.closed(held)
            held.release()
            held = None
        return held

    def sync_range(self, path: Path, size: int, start: int, end: int) -> bool:
        """Make bytes [start, end) of the file durable, and leave its other dirty pages alone
        (``mqstore.engine.log.range_sync``: the writer's pages populated ahead). A file synced to its end is
        let go: nothing is written to it again, and retention may delete it."""
        held = self._held(self._ranges, path)
        if held is None:
            try:
                ranged = RangeSync(path, size)
            except FileNotFoundError:
                return False  # deleted by retention
            held = self._ranges[path] = _Synced(self._ranges, path, ranged.fd, ranged)
            self.open_files.opened(held)
        assert held.ranged is not None
        held.used = True
        held.ranged.sync(start, end)  # an error here propagates: the actor dies rather than claim durability
        if end >= size:
            self.open_files.closed(held)
            held.release()
        return True

    def fsync(self, path: Path) -> bool:
        held = self._held(self._fds, path)
        if held is None:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                return False  # not created yet, or deleted by retention
            held = self._fds[path] = _Synced(self._fds, path, fd, None)
            self.open_files.opened(held)
        held.used = True
        os.fsync(held.fd)  # an error here propagates: the actor dies rather than claim durability
        return True

    def close(self) -> None:
        for held in [*self._fds.values(), *self._ranges.values()]:
            self.open_files.closed(held)
            held.release()
