"""A byte range of a file made durable, and nothing else of it: ``msync(MS_SYNC)`` of the range
through a read-only shared mapping that nothing reads or writes through.

Why not ``fsync``: it writes back every dirty page of the file. The commitlog's pages just ahead of
its writer are dirty zeros, populated for writing (``mqstore.engine.log.prefault``); a whole-file fsync
writes them to disk before the writer fills them (and again once it has), and write-protects them,
so the writer's stores fault on them after all (4,800 faults of the writer's loop in 300,000
messages of 128 B, 2,048 pages ahead written back by each 500 ms flush). On Linux ``msync(MS_SYNC)``
is ``vfs_fsync_range(file, start, end, datasync=1)``: the range's dirty pages are written back and
waited for, and so is the journal commit that makes them readable after a crash (an unwritten
extent turned written), as ``fdatasync`` would; the pages outside the range are left alone.

The mapping is made with libc's ``mmap`` through ctypes, read-only: Python's ``mmap.flush`` does
nothing on a read-only map, and the flush service never maps the commitlog writable. ``msync``
runs without the GIL (ctypes releases it). A failure raises OSError: the caller must not claim the
range durable.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

from mqstore.engine.log.mapped_file import OS_PAGE_SIZE

MS_SYNC = 4  # linux/mman.h (asm-generic)
_MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_mmap.restype = ctypes.c_void_p
_msync = _libc.msync
_msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_msync.restype = ctypes.c_int
_munmap = _libc.munmap
_munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_munmap.restype = ctypes.c_int


def _os_error(call: str, path: Path) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{call}: {os.strerror(err)}", str(path))


class RangeSync:
    """One file's first ``size`` bytes mapped read-only, for ``sync`` of ranges of it."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.fd = os.open(path, os.O_RDONLY)
        address = _mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, self.fd, 0)
        if address is None or address == _MAP_FAILED:
            error = _os_error("mmap", path)
            os.close(self.fd)
            raise error
        self._address: int = address

    def sync(self, start: int, end: int) -> None:
        """Make [start, end) durable (from the page that holds ``start``); raises OSError if not."""
        start = max(0, start - start % OS_PAGE_SIZE)
        end = min(end, self.size)
        if end > start and _msync(self._address + start, end - start, MS_SYNC) != 0:
            raise _os_error("msync", self.path)

    def close(self) -> None:
        if self.fd < 0:
            return
        _munmap(self._address, self.size)
        os.close(self.fd)
        self.fd = -1
