"""Pages of the commitlog faulted in ahead of its writer, and its next file made ready before the
writer rolls into it (RocketMQ's AllocateMappedFileService with its warm-up of a new mapped file).

The first write to a page of a fresh, fallocated file costs a page fault that allocates and zeroes
the page: many times the cost of the copy itself, paid by the single writer on the send path. A
process other than the writer (the flush service) asks the kernel to populate the page cache for
the range just ahead of the written end (``madvise(MADV_POPULATE_READ)`` on its own read-only
mapping), so the writer's copy finds the pages there. Nothing is written and nothing is dirtied:
the bytes stay the zeros fallocate promised, and a reader or a recovery sees exactly what it would
have without the warming. Where the kernel lacks the advice (before Linux 5.14), warming is off.

The spare next file. Rolling used to allocate the next file inline, on the writer's send path:
create, ``posix_fallocate`` of a whole file, map, then fault every first page. The same process
that warms pages (``prepare_spare``, a step per call) also makes the next file ahead of time:

1. ``.spare.preparing`` is created, allocated to the full file size and its first ``ahead_bytes``
   populated, the same advice as above. A full disk (ENOSPC), or any other error of the file
   system, only skips the spare: the file is removed, ``spare_error`` says why, and no new try is
   made before the writer has rolled again (its own inline allocation then meets the full disk,
   and handles it as it always has). The spare is off the durability path, so nothing is lost by
   skipping it, and an error here never takes the flush service down.
2. Once warm, its mapping and descriptor are closed (this process never touches it again) and it is
   renamed ``.spare``: the rename is the "ready" mark, so a half-made file is never adopted.
3. The writer (``MappedFileQueue.create_file`` with ``adopt_spares``) renames ``.spare`` to the next
   20-digit name and maps it; the pages populated here are in the page cache, shared by inode, so
   its first writes take minor faults only. With no ``.spare`` there, it allocates inline as before.

Why the spare lives under a dot name in the commitlog directory: a rename is atomic only within one
filesystem, and every reader of the log (the queue's ``open`` and ``refresh``, ``infer_file_size``,
the Spark pipeline and the offline tools, which all list through ``is_queue_file_name``) counts
digit names only. A full-size, all-zero file under a digit name before the writer adopts it would
move ``max_offset``, readers and recovery; under ``.spare`` it is invisible. A SIGKILL of this
process leaves ``.spare.preparing`` behind (removed when the next one starts) or a ready ``.spare``
(kept, and adopted); a SIGKILL of the writer around its rename leaves ``.spare`` or the new file
exactly as an inline create would. The spare is never written, so it holds zeros whatever happens.

One spare, not RocketMQ's next and next-next: the file is ready within a poll round or two of the
roll that took the last one, long before the writer fills the next file; only a file size so small
that one send batch fills it outruns it, and then the writer allocates inline, as before. Pages are
populated, not written (RocketMQ writes a zero every page, then may ``mlock``): written zeros would
dirty the page cache, be written back to disk, and could make the writer wait on that writeback.

Measured on the 2-core development machine (``mqstore.scripts.bench.roll``, 64 MiB files, 256 KiB batches,
spare on and off interleaved): the writer's append that rolls took 388 us median (483 max, 28 rolls)
adopting the spare, 3366 us median (11.9 ms max) allocating inline; a steady append took 55 us. In a
whole broker the batch that rolls answered in 4.97 ms median with the spare, 5.66 ms without (16 MiB
files: 3.18 and 5.35 ms; other batches 2.8 to 3.0 ms); the worst RTs of either run were the shared
machine's noise, as large away from any roll.

The writer's own mapping, populated for writing ahead of its written end, is ``mqstore.engine.log.prefault``.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from mqstore.engine.log.mapped_file import OS_PAGE_SIZE
from mqstore.engine.log.mapped_file_queue import SPARE_NAME, SPARE_PREPARING_NAME, MappedFileQueue
from mqstore.engine.log.open_files import OpenFiles

MADV_POPULATE_READ = 22  # linux/mman.h; Python's mmap module does not name it
DEFAULT_AHEAD_BYTES = 64 * 1024 * 1024
DEFAULT_STEP_BYTES = 4 * 1024 * 1024


class PageWarmer:
    def __init__(self, directory: Path, file_size: int, ahead_bytes: int = DEFAULT_AHEAD_BYTES,
                 step_bytes: int = DEFAULT_STEP_BYTES, *, spare: bool = False,
                 open_files: OpenFiles | None = None) -> None:
        """``spare``: also prepare the next file (this process must then be the only one doing so)."""
        self.directory = directory
        self.file_size = file_size
        self.queue = MappedFileQueue.open(directory, file_size, writable=False, open_files=open_files)
        self.ahead_bytes = ahead_bytes
        self.step_bytes = step_bytes
        self.warmed_to = 0
        self.enabled = ahead_bytes > 0
        self.spare_enabled = spare
        self.spares_prepared = 0
        self.spare_error: str | None = None   # why the last spare was skipped (None: it was not)
        self._spare_fd = -1
        self._spare_mm: mmap.mmap | None = None
        self._spare_warmed = 0
        self._spare_failed_file = -1          # the writer's file when the last try failed
        self._spare_path = str(directory / SPARE_NAME)
        if spare:
            self._discard_leftovers()

    def close(self) -> None:
        """Close the spare being prepared and remove it (a ready ``.spare`` is kept for the writer)."""
        if self._spare_fd >= 0:
            self._close_spare()
            (self.directory / SPARE_PREPARING_NAME).unlink(missing_ok=True)
        self.queue.close()

    def warm(self, written_end: int) -> int:
        """Populate at most one step of pages in [written_end, written_end + ahead); returns how many
        bytes were advised (0 when there is nothing to do, or warming is off)."""
        if not self.enabled:
            return 0
        start = max(self.warmed_to, written_end - written_end % OS_PAGE_SIZE)
        if start >= written_end + self.ahead_bytes:
            return 0
        mf = self.queue.find(start)
        if mf is None:
            self.queue.refresh()  # the writer may have rolled into a new file
            mf = self.queue.find(start)
            if mf is None:
                return 0
        pos = start - mf.file_base
        length = min(self.step_bytes, mf.file_size - pos, written_end + self.ahead_bytes - start)
        if not self._populate(mf.buffer, pos, length):
            return 0
        self.warmed_to = start + length
        return length

    # -- the spare next file -----------------------------------------------------------------------

    def prepare_spare(self, written_end: int) -> int:
        """One step towards a ready ``.spare``: create and allocate it, populate one step of it, or
        mark it ready. Returns the bytes this step handled (0: nothing to do, already ready, or
        skipped; see ``spare_error``)."""
        if not self.spare_enabled:
            return 0
        if self._spare_fd < 0:
            writer_file = max(written_end - 1, 0) // self.file_size  # a full file's end is still in it
            # a ready spare is looked for by its path as a string: the flush service asks once a group commit
            if self._spare_failed_file == writer_file or os.path.exists(self._spare_path) \
                    or not self.directory.is_dir():
                return 0
            return self._create_spare(writer_file)
        if not self.directory.is_dir():
            return 0
        target = min(self.ahead_bytes, self.file_size)
        if self._spare_warmed < target and self.enabled and self._spare_mm is not None:
            length = min(self.step_bytes, target - self._spare_warmed)
            if self._populate(self._spare_mm, self._spare_warmed, length):
                self._spare_warmed += length
                return length
        self._close_spare()
        try:
            os.rename(self.directory / SPARE_PREPARING_NAME, self.directory / SPARE_NAME)
        except OSError as exc:
            return self._skip_spare(exc, max(written_end - 1, 0) // self.file_size)
        self.spares_prepared += 1
        return OS_PAGE_SIZE

    def _create_spare(self, writer_file: int) -> int:
        try:
            fd = os.open(self.directory / SPARE_PREPARING_NAME, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            return self._skip_spare(exc, writer_file)
        try:
            os.posix_fallocate(fd, 0, self.file_size)
            mm = mmap.mmap(fd, self.file_size, mmap.MAP_SHARED, mmap.PROT_READ)
        except OSError as exc:
            os.close(fd)
            return self._skip_spare(exc, writer_file)
        self._spare_fd, self._spare_mm, self._spare_warmed = fd, mm, 0
        self.spare_error = None
        return self.file_size

    def _skip_spare(self, exc: OSError, writer_file: int) -> int:
        """No spare for this file (ENOSPC above all): the writer allocates inline, as without one."""
        (self.directory / SPARE_PREPARING_NAME).unlink(missing_ok=True)
        self._spare_failed_file = writer_file
        self.spare_error = f"spare next file skipped: {exc}"
        return 0

    def _close_spare(self) -> None:
        if self._spare_mm is not None:
            self._spare_mm.close()
            self._spare_mm = None
        os.close(self._spare_fd)
        self._spare_fd = -1

    def _discard_leftovers(self) -> None:
        """A predecessor killed while preparing left ``.spare.preparing``: it is only ever a spare, so
        it goes. A ready ``.spare`` of another size (never made by this geometry) goes too."""
        (self.directory / SPARE_PREPARING_NAME).unlink(missing_ok=True)
        spare = self.directory / SPARE_NAME
        try:
            if spare.stat().st_size != self.file_size:
                spare.unlink(missing_ok=True)
        except FileNotFoundError:
            pass

    def _populate(self, mm: mmap.mmap, pos: int, length: int) -> bool:
        try:
            mm.madvise(MADV_POPULATE_READ, pos, length)
        except OSError:  # an older kernel: the writer faults its own pages, as before
            self.enabled = False
            return False
        return True
