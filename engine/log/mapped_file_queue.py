"""An ordered run of equal-size mapped files addressed by one global offset (RocketMQ's MappedFileQueue).

File ``N`` holds offsets ``[base_N, base_N + file_size)`` and is named by ``base_N`` in 20 digits.
The queue's cursors are global: ``max_offset`` (written), ``flushed_where``. With ``dir_sync`` set,
``flush`` also makes the directory entries of files made since durable (and the directory's own, up to
the store): a process that flushes its own files this way counts them durable only after their names.

Only all-digit names are the queue's files; every listing (``open``, ``refresh``, ``infer_file_size``)
goes through ``is_queue_file_name``, so a dot-name in the directory is never log data. The commitlog
keeps its spare next file there (``SPARE_NAME``, made ready by ``mqstore.engine.log.page_warmer`` in the flush
service, under ``SPARE_PREPARING_NAME`` until then): a queue with ``adopt_spares`` set takes it as its
next file with one rename instead of allocating one inline, and allocates inline when none is ready.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from mqstore.engine.log.mapped_file import MappedFile, MappedFileError, file_name
from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.meta.metafile import DirectorySync, fsync_dir

SPARE_NAME = ".spare"                        # a whole, zero, allocated next file, ready to adopt
SPARE_PREPARING_NAME = ".spare.preparing"    # the same while its owner still allocates or warms it


def is_queue_file_name(name: str) -> bool:
    """Whether ``name`` is one of a queue's files (its base offset in digits). The spare names, and
    anything else starting with a dot, never are."""
    return name.isascii() and name.isdigit()


def infer_file_size(directory: Path) -> int | None:
    """The size of the files already in ``directory`` (None when it holds none)."""
    for path in sorted(directory.iterdir()) if directory.is_dir() else ():
        if path.is_file() and is_queue_file_name(path.name) and path.stat().st_size > 0:
            return path.stat().st_size
    return None


class MappedFileQueue:
    def __init__(self, directory: Path, file_size: int, files: list[MappedFile], writable: bool,
                 open_files: OpenFiles | None = None) -> None:
        self.directory = directory
        self.file_size = file_size
        self.files = files
        self.writable = writable
        self.open_files = open_files  # the process's bounded set of open files (None: every file stays mapped)
        if open_files is not None:
            open_files.watch(self)
        self.flushed_where = 0
        self.adopt_spares = False  # set by the one writer of a family whose files someone prepares
        self.spares_adopted = 0
        self.dir_sync: DirectorySync | None = None  # set by an owner that flushes through ``flush``

    @classmethod
    def open(cls, directory: Path | str, file_size: int, *, writable: bool = True,
             open_files: OpenFiles | None = None) -> MappedFileQueue:
        """Map every file in ``directory`` (created when missing; with ``open_files``, each on first
        use). A zero-length last file, left by a crash during creation, is removed; any other size
        mismatch is an error."""
        directory = Path(directory)
        if writable:
            directory.mkdir(parents=True, exist_ok=True)
        paths = sorted(p for p in directory.iterdir() if p.is_file() and is_queue_file_name(p.name)) \
            if directory.is_dir() else []
        if paths and paths[-1].stat().st_size == 0:
            # a crash between creating and allocating the newest file (or a writer doing it right now)
            if writable:
                paths[-1].unlink()
            paths.pop()
        files: list[MappedFile] = []
        try:
            for path in paths:
                files.append(MappedFile.open(path, file_size, writable=writable, open_files=open_files))
        except BaseException:
            for mf in files:
                mf.close()
            raise
        for prev, cur in itertools.pairwise(files):
            if cur.file_base - prev.file_base != file_size:
                for mf in files:
                    mf.close()
                raise MappedFileError(f"{directory}: files {prev.path.name} and {cur.path.name} are not adjacent")
        queue = cls(directory, file_size, files, writable, open_files)
        queue.flushed_where = queue.max_offset
        return queue

    def close(self) -> None:
        for mf in self.files:
            mf.close()

    def refresh(self) -> bool:
        """For a process that maps files another one writes: map the files created since, forget
        the leading ones deleted. Returns whether anything changed."""
        changed = False
        while self.files and not self.files[0].path.exists():
            self.files.pop(0).close()
            changed = True
        last_base = self.files[-1].file_base if self.files else -1
        if not self.directory.is_dir():
            return changed
        for path in sorted(p for p in self.directory.iterdir()
                           if is_queue_file_name(p.name) and int(p.name) > last_base):
            try:
                if path.stat().st_size != self.file_size:
                    break  # still being allocated by its writer
                self.files.append(MappedFile.open(path, self.file_size, writable=self.writable,
                                                  open_files=self.open_files))
            except FileNotFoundError:
                break  # listed, then removed by its writer (a file it could not allocate on a full disk)
            changed = True
        return changed

    def forget_gone(self) -> None:
        """Drop the leading files found deleted (``MappedFile.gone``): what ``refresh`` does, told by
        the process's open files instead of a listing."""
        while self.files and self.files[0].gone:
            self.files.pop(0).close()

    # -- cursors -----------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files[0].file_base if self.files else -1

    @property
    def max_offset(self) -> int:
        """Global offset one past the last written byte (0 for an empty queue)."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_base + last.written_pos

    @property
    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def roll_next(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # -- files -------------------------------------------------------------------------------------

    def create_file(self, file_base: int) -> MappedFile:
        if file_base % self.file_size:
            raise MappedFileError(f"file base {file_base} is not a multiple of {self.file_size}")
        path = self.directory / file_name(file_base)
        mf = self._adopt_spare(path) if self.adopt_spares else None
        if mf is None:
            mf = MappedFile.create(path, self.file_size, self.open_files)
        self.files.append(mf)
        return mf

    def _adopt_spare(self, path: Path) -> MappedFile | None:
        """The ready spare renamed to ``path`` and mapped, or None (none ready: create inline).

        The rename is atomic, so ``path`` appears whole and full-size, as an inline create leaves it
        once allocated; a crash right after leaves what a crash right after that create leaves. The
        directory entry is made durable by the flush service before it claims any byte of the file
        flushed, not here on the send path. The existence check before the rename is sound because
        only this queue's one writer makes digit names (a rename would replace a file silently)."""
        if path.exists():
            return None  # let the inline create fail as it always has
        spare = self.directory / SPARE_NAME
        try:
            if spare.stat().st_size != self.file_size:  # never made for this geometry: never log data
                spare.unlink(missing_ok=True)
                return None
            os.rename(spare, path)
        except FileNotFoundError:
            return None
        try:
            mf = MappedFile.open(path, self.file_size, writable=True, open_files=self.open_files)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        mf.set_positions(0)
        self.spares_adopted += 1
        return mf

    def last_file_for_append(self, start_offset: int = 0) -> MappedFile:
        """The file the next append goes to, created when the queue is empty or the last file full."""
        last = self.last_file
        if last is not None and not last.is_full:
            return last
        base = last.file_end if last is not None else start_offset - start_offset % self.file_size
        return self.create_file(base)

    def find(self, offset: int, *, return_first: bool = False) -> MappedFile | None:
        """The file holding global ``offset``."""
        if not self.files:
            return None
        first = self.files[0]
        if first.file_base <= offset < self.files[-1].file_end:
            index = offset // self.file_size - first.file_base // self.file_size
            if 0 <= index < len(self.files) and self.files[index].contains(offset):
                return self.files[index]
            for mf in self.files:  # the list can only be out of order through a bug; stay correct anyway
                if mf.contains(offset):
                    return mf
        return first if return_first else None

    def iter_from(self, offset: int) -> Iterator[MappedFile]:
        for mf in self.files:
            if mf.file_end > offset:
                yield mf

    # -- durability --------------------------------------------------------------------------------

    def flush(self, least_pages: int = 0) -> int:
        """Flush the file holding ``flushed_where``; returns the new ``flushed_where``. One file per
        call, as RocketMQ does, so a caller loops until it stops moving."""
        mf = self.find(self.flushed_where, return_first=self.flushed_where == 0)
        if mf is None:
            return self.flushed_where
        mf.flush(least_pages)
        if self.dir_sync is not None:  # a file made since the last flush: its name, before anyone counts it
            self.dir_sync.sync(self.directory)
        self.flushed_where = mf.file_base + mf.flushed_pos
        return self.flushed_where

    def flush_all(self) -> int:
        while True:
            before = self.flushed_where
            if self.flush(0) == before:
                return before

    # -- trimming ----------------------------------------------------------------------------------

    def truncate_after(self, offset: int) -> None:
        """Drop every byte at or beyond global ``offset``: later files are deleted, the file holding it
        is cut there."""
        for mf in list(self.files):
            if mf.file_end <= offset:
                continue
            if offset >= mf.file_base:
                if offset - mf.file_base < mf.written_pos:
                    mf.truncate_after(offset - mf.file_base)
            else:
                mf.delete()
                self.files.remove(mf)
        self.flushed_where = min(self.flushed_where, offset)
        if self.writable:
            fsync_dir(self.directory)

    def delete_expired_by_time(self, expired_ms: int, now_ms: int, *, clean_immediately: bool = False,
                               batch_max: int = 10, is_deletable: Callable[[MappedFile], bool] | None = None
                               ) -> int:
        """Delete leading files older than ``expired_ms`` (never the last one, never from the middle)."""
        deleted = 0
        for mf in list(self.files[:-1]):
            if deleted >= batch_max:
                break
            expired = now_ms >= mf.last_modified_ms() + expired_ms
            if not (expired or clean_immediately) or (is_deletable is not None and not is_deletable(mf)):
                break
            self._delete_leading(mf)
            deleted += 1
        return deleted

    def delete_expired_by_offset(self, offset: int, last_unit_value: Callable[[MappedFile], int]) -> int:
        """Delete leading files (never the last) whose last unit references something below ``offset``."""
        deleted = 0
        for mf in list(self.files[:-1]):
            if last_unit_value(mf) >= offset:
                break
            self._delete_leading(mf)
            deleted += 1
        return deleted

    def _delete_leading(self, mf: MappedFile) -> None:
        """Delete the first file, durably before the next: a power cut keeps any subset of unsynced
        unlinks, and a later file gone with an earlier one back leaves files ``open`` refuses as not
        adjacent."""
        mf.delete()
        self.files.remove(mf)
        fsync_dir(self.directory)

    def delete_all(self) -> None:
        for mf in self.files:
            mf.delete()
        self.files.clear()
        self.flushed_where = 0
