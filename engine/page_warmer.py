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

Measured on the 2-core development machine (``scripts.bench_roll``, 64 MiB files, 256 KiB batches,
spare on and off interleaved): the writer's append that rolls took 388 us median (483 max, 28 rolls)
adopting the spare, 3366 us median (11.9 ms max) allocating inline; a steady append took 55 us. In a
whole broker the batch that rolls answered in 4.97 ms median with the spare, 5.66 ms without (16 MiB
files: 3.18 and 5.35 ms; other batches 2.8 to 3.0 ms); the worst RTs of either run were the shared
machine's noise, as large away from any roll.

The writer's own mapping (``WriterPrefault``). Page tables belong to a mapping, not to the page
cache: the pages warmed above are in memory, but the writer's first store to each still takes a
fault that maps the page writable into its own process (ext4's ``page_mkwrite`` included): about
half of the writer's CPU per 4 KiB message. ``WriterPrefault`` populates the writer's mapping itself
just ahead of its written end with ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14), which takes those
faults at once, as a store would, without storing anything. It is passive like the rest of the
engine: the writer process drives it from a thread of its own (``actors.prefault``) through libc
``madvise`` called with ctypes, which releases the GIL; ``mmap.madvise`` holds it for the whole
call (measured on CPython 3.11: a spinning thread made 1% of its progress during a 256 MiB
``mmap.madvise``, 91% during the same call through ctypes). The caller keeps the file mapped for
the call. Where the kernel refuses the advice (EINVAL before 5.14), populating is off, with
``error`` saying why.

Crash safety is untouched: not one byte changes. A write fault on a shared mapping marks the page
dirty, so a page populated ahead is dirty zeros until the writer fills it, and an fsync of the whole
file (the flush service's) in between writes it back as zeros, which is what the fallocated file
read as anyway; a SIGKILL or a crash leaves exactly the bytes it would have left without populating.
That write-back is the cost: the page is written to disk twice, and is write-protected again, so the
writer's store takes a (cheaper) fault after all. Measured (``scripts.bench_prefault``, 2 producers,
batches of 100, 8 MiB ahead, on and off interleaved, medians; the 2-core machine shared with other
work), per message:

=================  ============  ============  =============  ============  ==========
4 KiB bodies       writer loop   writer total  producers      disk written  body MB/s
=================  ============  ============  =============  ============  ==========
ASYNC_FLUSH on     7.8 us        15.2 us       13.3 us        4.37 KB       164
ASYNC_FLUSH off    13.2 us       14.3 us       14.0 us        4.09 KB       123
SYNC_FLUSH on      10.0 us       17.2 us       13.8 us        17.2 KB       139
SYNC_FLUSH off     16.3 us       17.5 us       13.3 us        12.1 KB       134
=================  ============  ============  =============  ============  ==========

The ASYNC CPU figures are medians of 3 pairs, its disk bytes of 2 more; SYNC's are of 2 pairs. The
MB/s are the shared machine's: 2 more ASYNC pairs gave 157 on and 152 off. At 128 B bodies (32
records a page) nothing moves: writer loop 3.7 us on and 3.8 off, total 4.2 both. The loop (the one
thread every send waits on) sheds 40-50% of its CPU at 4 KiB; the faults' cost moves to the prefault
thread, on the other core, about unchanged (populating costs as much as faulting). Hence on by
default under ASYNC_FLUSH (7% more bytes written to disk: the pages ahead that a 500 ms flush
catches), off by default under SYNC_FLUSH, whose fsync after every batch writes back nearly every
populated page before the writer reaches it (42% more bytes written).

A roll's new file is populated from its first page once the loop hands it over, after the batch that
rolled: that batch and the next may fault their first pages, as before.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Callable
from pathlib import Path

from engine.mapped_file import OS_PAGE_SIZE, MappedFile
from engine.mapped_file_queue import SPARE_NAME, SPARE_PREPARING_NAME, MappedFileQueue

MADV_POPULATE_READ = 22  # linux/mman.h; Python's mmap module does not name it
DEFAULT_AHEAD_BYTES = 64 * 1024 * 1024
DEFAULT_STEP_BYTES = 4 * 1024 * 1024
MADV_POPULATE_WRITE = 23  # linux/mman.h
DEFAULT_PREFAULT_STEP_BYTES = 1024 * 1024  # one madvise call: what a file close may wait for
DEFAULT_PREFAULT_AHEAD_BYTES = 8 * 1024 * 1024


class PageWarmer:
    def __init__(self, directory: Path, file_size: int, ahead_bytes: int = DEFAULT_AHEAD_BYTES,
                 step_bytes: int = DEFAULT_STEP_BYTES, *, spare: bool = False) -> None:
        """``spare``: also prepare the next file (this process must then be the only one doing so)."""
        self.directory = directory
        self.file_size = file_size
        self.queue = MappedFileQueue.open(directory, file_size, writable=False)
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
        if not self.spare_enabled or not self.directory.is_dir():
            return 0
        if self._spare_fd < 0:
            writer_file = max(written_end - 1, 0) // self.file_size  # a full file's end is still in it
            if self._spare_failed_file == writer_file or (self.directory / SPARE_NAME).exists():
                return 0
            return self._create_spare(writer_file)
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


class WriterPrefault:
    """The writer's own mapping of its last file, populated for writing up to ``ahead_bytes`` past
    its written end, a step per call. Never writes a byte (see the module docstring)."""

    def __init__(self, ahead_bytes: int, step_bytes: int = DEFAULT_PREFAULT_STEP_BYTES, *,
                 advice: int = MADV_POPULATE_WRITE) -> None:
        self.ahead_bytes = ahead_bytes
        self.step_bytes = max(OS_PAGE_SIZE, step_bytes - step_bytes % OS_PAGE_SIZE)
        self.advice = advice
        self.error: str | None = None       # why populating stopped (None: it has not)
        self.populated_bytes = 0            # advised in all, for the actor's status
        self.file: MappedFile | None = None  # the file ``populated_pos`` is in
        self.populated_pos = 0              # the mapping is populated up to here (a page boundary)
        self._madvise = _libc_madvise()
        self.enabled = ahead_bytes > 0 and self._madvise is not None
        if ahead_bytes > 0 and self._madvise is None:
            self.error = "libc madvise is not available"

    def target_pos(self, mf: MappedFile, written_pos: int) -> int:
        """Where populating stops: a page boundary (madvise takes page-aligned addresses), or the end."""
        return min(mf.file_size, -(-(written_pos + self.ahead_bytes) // OS_PAGE_SIZE) * OS_PAGE_SIZE)

    def due(self, mf: MappedFile, written_pos: int) -> bool:
        """Whether a step is worth handing over: another file, or less than half the distance ahead
        left populated (so steps come in runs, not one per written page)."""
        if not self.enabled:
            return False
        if mf is not self.file:
            return written_pos < mf.file_size
        return self.populated_pos < self.target_pos(mf, written_pos) and (
            self.populated_pos - written_pos < self.ahead_bytes // 2)

    def step(self, mf: MappedFile, written_pos: int) -> int:
        """Populate at most one step of ``mf``'s mapping in [written_pos, written_pos + ahead);
        returns the bytes advised (0: nothing left to do, or populating is off). ``mf`` must stay
        mapped until this returns."""
        if not self.enabled or mf.closed:
            return 0
        if mf is not self.file:
            self.file, self.populated_pos = mf, 0
        start = max(self.populated_pos, written_pos - written_pos % OS_PAGE_SIZE)
        length = min(self.step_bytes, self.target_pos(mf, written_pos) - start)
        if length <= 0:
            return 0
        if not self._populate(mf.buffer, start, length):
            return 0
        self.populated_pos = start + length
        self.populated_bytes += length
        return length

    def _populate(self, mm: mmap.mmap, pos: int, length: int) -> bool:
        view = ctypes.c_char.from_buffer(mm)  # an export of the mapping only for this line
        address = ctypes.addressof(view)
        del view
        assert self._madvise is not None
        if self._madvise(address + pos, length, self.advice) == 0:
            return True
        errno = ctypes.get_errno()
        if errno in (0, 4, 11):  # EINTR, EAGAIN: the next step tries again
            return False
        self.enabled = False
        self.error = f"madvise({self.advice}) failed: {os.strerror(errno)}"
        return False


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise
