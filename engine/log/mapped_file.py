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
from mqstore.engine.log.file_identity import FileIdentity, identity, identity_of, map_same_file
from mqstore.engine.log.open_files import OpenFiles, unmap

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
    """With ``open_files`` the mapping is made on first use and may be let go between uses (idle,
    deleted, or over the set's bound: ``mqstore.engine.log.open_files``); ``buffer`` maps it again.
    Without, it is mapped from open to close. The descriptor is closed once mapped: the mapping
    holds its own."""

    def __init__(self, path: Path, file_base: int, file_size: int, file_id: FileIdentity, mm: mmap.mmap | None,
                 written_pos: int, writable: bool, open_files: OpenFiles | None = None) -> None:
        self.path = path
        self.file_base = file_base
        self.file_size = file_size
        # the file opened: a path naming another (its inode number reused) is a file made since
        self._identity = file_id
        self._mm: mmap.mmap | None = mm
        self._closed = False
        self.used = True
        self.gone = False  # found deleted (or replaced) after it was opened: never mapped again
        self.open_files = open_files
        self.written_pos = written_pos
        self.committed_pos = written_pos
        self.flushed_pos = written_pos
        self.writable = writable
        if mm is not None and open_files is not None:
            open_files.opened(self)

    # -- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, file_size: int, open_files: OpenFiles | None = None) -> MappedFile:
        """Allocate and map a new, empty file; raises OSError (ENOSPC) before anything is mapped."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.posix_fallocate(fd, 0, file_size)
            mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            file_id = identity_of(fd)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
        mf = cls(path, int(path.name), file_size, file_id, mm, 0, True, open_files)
        mf.flushed_pos = mf.committed_pos = 0
        return mf

    @classmethod
    def open(cls, path: Path, file_size: int, *, writable: bool = True,
             open_files: OpenFiles | None = None) -> MappedFile:
        """Map an existing file (with ``open_files``: on first use); like RocketMQ's load, every
        cursor starts at the file's end and recovery trims them."""
        st = path.stat()
        if st.st_size != file_size:
            raise MappedFileError(f"{path}: size {st.st_size} differs from the store's file size {file_size}")
        mf = cls(path, int(path.name), file_size, identity(path), None, file_size, writable, open_files)
        if open_files is None:
            mf._map()
        return mf

    def _map(self) -> mmap.mmap:
        if self._closed:
            raise MappedFileError(f"{self.path} is closed")
        mm = None if self.gone else map_same_file(self.path, self.file_size, self.writable, self._identity)
        if mm is None:
            self.gone = True
            raise MappedFileError(f"{self.path} was deleted (or deleted and made again)")
        self._mm = mm
        if self.open_files is not None:
            self.open_files.opened(self)
        return mm

    def release(self) -> bool:
        """Unmap until the next use; False while a view of the mapping is out (borrowed)."""
        if self._mm is not None:
            if not unmap(self._mm):
                return False
            self._mm = None
        return True

    def deleted(self) -> bool:
        """Whether the path no longer names this file; remembered in ``gone``."""
        if not self.gone:
            self.gone = self.replaced()
        return self.gone

    @property
    def mapped(self) -> bool:
        return self._mm is not None

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._closed = True
        if self.open_files is not None:
            self.open_files.closed(self)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def replaced(self) -> bool:
        """Whether the file at this path is no longer the one mapped (deleted, or deleted and made again)."""
        try:
            return self._closed or not identity(self.path).same_file(self._identity)
        except FileNotFoundError:
            return True

    @property
    def buffer(self) -> mmap.mmap:
        """The mapping itself, for zero-copy views; release every view before ``close``. With
        ``open_files``, use it within the round that asked for it (mqstore.engine.log.open_files)."""
        mm = self._mm
        if mm is None:
            mm = self._map()
        self.used = True
        return mm

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
        fd = os.open(self.path, os.O_RDWR)
        try:
            if page_end < self.file_size:
                length = self.file_size - page_end
                if not _punch_hole(fd, page_end, length):
                    for start in range(page_end, self.file_size, ZERO_CHUNK):  # no hole punching here
                        os.pwrite(fd, bytes(min(ZERO_CHUNK, self.file_size - start)), start)
                os.posix_fallocate(fd, page_end, length)  # ENOSPC here leaves a readable, sparse tail
            os.fsync(fd)
        finally:
            os.close(fd)
        self.set_positions(pos)

    def last_modified_ms(self) -> int:
        return self.path.stat().st_mtime_ns // 1_000_000

    def __repr__(self) -> str:
        return (f"MappedFile({self.path.name}, written={self.written_pos}, flushed={self.flushed_pos}, "
                f"size={self.file_size})")
