"""One fixed-size, memory-mapped file named by the 20-digit offset of its first byte.

Three cursors track durability, always ``flushed <= committed <= written``: ``written`` is what was
appended into the mapping, ``committed`` is what is visible to other processes (the same as written,
since every process maps the same page cache), ``flushed`` is what an msync made durable.

New files are allocated with ``posix_fallocate`` before they are mapped: writing through a map into
a sparse file on a full disk kills the process with SIGBUS, while fallocate fails cleanly with ENOSPC
and, on ext4, reserves the blocks without writing them.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

from mqstore.engine.errors import MqstoreError

OS_PAGE_SIZE = 4096
FILE_NAME_DIGITS = 20


ZERO_CHUNK = 1 << 20
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02


def _punch_hole(fd: int, offset: int, length: int) -> bool:
    """Linux fallocate(PUNCH_HOLE | KEEP_SIZE): the range reads as zeros, the size is unchanged.
    False where the platform or filesystem cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return False
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
    return bool(fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length) == 0)


def file_name(file_base: int) -> str:
    return f"{file_base:0{FILE_NAME_DIGITS}d}"


class MappedFileError(MqstoreError, OSError):
    """A mapped file is missing, of the wrong size, or could not be allocated."""


class MappedFile:
    def __init__(self, path: Path, file_base: int, file_size: int, fd: int, mm: mmap.mmap,
                 written_pos: int, writable: bool) -> None:
        self.path = path
        self.file_base = file_base
        self.file_size = file_size
        self._fd = fd
        self._inode = os.fstat(fd).st_ino  # an open file's inode never changes: ``replaced`` stats the path only
        self._mm: mmap.mmap | None = mm
        self.written_pos = written_pos
        self.committed_pos = written_pos
        self.flushed_pos = written_pos
        self.writable = writable

    # -- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, file_size: int) -> MappedFile:
        """Allocate and map a new, empty file; raises OSError (ENOSPC) before anything is mapped."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.posix_fallocate(fd, 0, file_size)
            mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        mf = cls(path, int(path.name), file_size, fd, mm, 0, True)
        mf.flushed_pos = mf.committed_pos = 0
        return mf

    @classmethod
    def open(cls, path: Path, file_size: int, *, writable: bool = True) -> MappedFile:
        """Map an existing file; like RocketMQ's load, every cursor starts at the file's end and
        recovery trims them."""
        actual = path.stat().st_size
        if actual != file_size:
            raise MappedFileError(f"{path}: size {actual} differs from the store's file size {file_size}")
        fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
        try:
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, prot)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, int(path.name), file_size, fd, mm, file_size, writable)

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def replaced(self) -> bool:
        """Whether the file at this path is no longer the one mapped (deleted, or deleted and made again)."""
        try:
            return self.closed or os.stat(self.path).st_ino != self._inode
        except FileNotFoundError:
            return True

    @property
    def buffer(self) -> mmap.mmap:
        """The mapping itself, for zero-copy views; release every view before ``close``."""
        if self._mm is None:
            raise MappedFileError(f"{self.path} is closed")
        return self._mm

    # -- cursors -----------------------------------------------------------------------------------

    @property
    def free_bytes(self) -> int:
        return self.file_size - self.written_pos

    @property
    def is_full(self) -> bool:
        return self.written_pos == self.file_size

    @property
    def file_end(self) -> int:
        return self.file_base + self.file_size

    def contains(self, phys_offset: int) -> bool:
        return self.file_base <= phys_offset < self.file_end

    def set_positions(self, pos: int) -> None:
        self.written_pos = self.committed_pos = self.flushed_pos = pos

    # -- data --------------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the written position and return the position it starts at."""
        pos = self.written_pos
        end = pos + len(data)
        if end > self.file_size:
            raise MappedFileError(f"{self.path}: append of {len(data)} bytes at {pos} passes the file end")
        self.buffer[pos:end] = data
        self.written_pos = self.committed_pos = end
        return pos

    def append_blank_tail(self, header: bytes) -> int:
        """Write the end-of-file blank header and move the written position to the file end."""
        pos = self.written_pos
        self.buffer[pos:pos + len(header)] = header
        self.written_pos = self.committed_pos = self.file_size
        return pos

    def read(self, pos: int, size: int) -> bytes:
        return self.buffer[pos:pos + size]

    def flush(self, least_pages: int = 0) -> int:
        """msync what was written since the last flush when at least ``least_pages`` dirty pages (or
        the whole file) wait; returns the flushed position. An msync failure raises."""
        if self.flushed_pos >= self.written_pos:
            return self.flushed_pos
        dirty_pages = self.written_pos // OS_PAGE_SIZE - self.flushed_pos // OS_PAGE_SIZE
        if least_pages > 0 and dirty_pages < least_pages and not self.is_full:
            return self.flushed_pos
        start = self.flushed_pos - self.flushed_pos % mmap.ALLOCATIONGRANULARITY
        self.buffer.flush(start, self.written_pos - start)
        self.flushed_pos = self.written_pos
        return self.flushed_pos

    def truncate_after(self, pos: int) -> None:
        """Drop everything from ``pos`` on: the bytes become zeros on disk, so a stale record or entry
        beyond the new end can never be mistaken for data by a later recovery.

        The file keeps its size throughout (other processes may map it: shrinking it, even for an
        instant, would SIGBUS a reader touching the tail). Whole pages past the cut are released
        with a hole punch and allocated again, instead of writing zeros over them."""
        if not self.writable:
            raise MappedFileError(f"{self.path} is read-only")
        page_end = min(self.file_size, -(-pos // OS_PAGE_SIZE) * OS_PAGE_SIZE)
        self.buffer[pos:page_end] = bytes(page_end - pos)
        self.buffer.flush()
        if page_end < self.file_size:
            length = self.file_size - page_end
            if not _punch_hole(self._fd, page_end, length):
                for start in range(page_end, self.file_size, ZERO_CHUNK):  # no hole punching here
                    os.pwrite(self._fd, bytes(min(ZERO_CHUNK, self.file_size - start)), start)
            os.posix_fallocate(self._fd, page_end, length)  # ENOSPC here leaves a readable, sparse tail
        os.fsync(self._fd)
        self.set_positions(pos)

    def last_modified_ms(self) -> int:
        return self.path.stat().st_mtime_ns // 1_000_000

    def __repr__(self) -> str:
        return (f"MappedFile({self.path.name}, written={self.written_pos}, flushed={self.flushed_pos}, "
                f"size={self.file_size})")
