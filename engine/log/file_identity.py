"""Which file a path names: its inode number and its birth time.

An inode number alone names a file only while something holds it: once its last link, descriptor
and mapping are gone, the filesystem may give the number to the next file made (ext4 does at once,
at the same path too). A process that lets a file go between uses (``mqstore.engine.log.open_files``)
and maps it again by its path must tell the file it had from a new one made at that path with the
old number. The birth time does: statx's ``stx_btime`` is set when the inode is made, and no write,
rename or ``chmod`` changes it (the change time does, on every write). Where statx or a birth time
is missing (an old kernel or C library, a filesystem that keeps none) only the numbers are compared.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_STATX_INO = 0x100
_STATX_BTIME = 0x800
_STATX_SIZE = 256  # struct statx, padding included
_MASK = struct.Struct("<I")        # stx_mask at 0
_INO = struct.Struct("<Q")         # stx_ino at 32
_BTIME = struct.Struct("<qI")      # stx_btime at 80: seconds, nanoseconds


@dataclass(frozen=True, slots=True)
class FileIdentity:
    inode: int
    birth_ns: int  # 0: not known here

    def same_file(self, other: FileIdentity) -> bool:
        """Whether both name one file: the same inode, born at the same moment where both births are known."""
        return self.inode == other.inode and (not self.birth_ns or not other.birth_ns
                                              or self.birth_ns == other.birth_ns)


def _load_statx() -> Any:
    try:
        statx = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):
        return None
    statx.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)
    statx.restype = ctypes.c_int
    return statx


_statx = _load_statx()


def _identity(dirfd: int, path: bytes, flags: int, name: str) -> FileIdentity | None:
    if _statx is None:
        return None
    buf = ctypes.create_string_buffer(_STATX_SIZE)
    if _statx(dirfd, path, flags, _STATX_INO | _STATX_BTIME, buf) != 0:
        err = ctypes.get_errno()
        if err == errno.ENOSYS:
            return None
        raise OSError(err, os.strerror(err), name)
    seconds, nanos = _BTIME.unpack_from(buf, 80)
    birth_ns = seconds * 1_000_000_000 + nanos if _MASK.unpack_from(buf, 0)[0] & _STATX_BTIME else 0
    return FileIdentity(_INO.unpack_from(buf, 32)[0], birth_ns)


def identity(path: Path) -> FileIdentity:
    """The file ``path`` names now; FileNotFoundError when none."""
    found = _identity(_AT_FDCWD, os.fsencode(path), 0, str(path))
    return found if found is not None else FileIdentity(os.stat(path).st_ino, 0)


def identity_of(fd: int) -> FileIdentity:
    """The file open as ``fd``."""
    found = _identity(fd, b"", _AT_EMPTY_PATH, f"descriptor {fd}")
    return found if found is not None else FileIdentity(os.fstat(fd).st_ino, 0)


def map_same_file(path: Path, size: int, writable: bool, file_id: FileIdentity) -> mmap.mmap | None:
    """``size`` bytes of ``path`` mapped shared, if the path still names the file ``file_id``; None
    when it was deleted or another file was made there."""
    try:
        fd = os.open(path, (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        if not identity_of(fd).same_file(file_id):
            return None
        return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0))
    finally:
        os.close(fd)  # the mapping holds its own
