"""The writer's own mapping of the commitlog, populated for writing just ahead of its written end.

Page tables belong to a mapping, not to the page cache: the pages the flush service warms
(``mqstore.engine.log.page_warmer``) are in memory, but the writer's first store to each still takes a fault
that maps the page writable into its own process (ext4's ``page_mkwrite`` included): about half of
the writer's CPU per 4 KiB message. ``WriterPrefault`` populates the writer's mapping itself
just ahead of its written end with ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14), which takes those
faults at once, as a store would, without storing anything. It is passive like the rest of the
engine: the writer process drives it from a thread of its own (``mqstore.actors.writer.prefault``) through libc
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
writer's store takes a (cheaper) fault after all. Measured (``mqstore.scripts.bench.prefault``, 2 producers,
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

Since then the flush service syncs only the commitlog bytes written since its last flush
(``mqstore.engine.log.range_sync``), not whole files: a page populated ahead is no longer written back as
zeros nor write-protected before the writer fills it, in either mode (the writer's loop took 4,846
faults on the commitlog in 300,000 ASYNC messages of 128 B before, none after). The figures above are
from before; the SYNC_FLUSH default, decided on them, has not been measured again at 4 KiB (at 128 B,
``python -m mqstore.scripts.bench.where --flush SYNC_FLUSH``, 2 runs each: writer 2.30 and 2.33 us a message
off, 2.40 and 2.60 on).

A roll's new file is populated from its first page once the loop hands it over, after the batch that
rolled: that batch and the next may fault their first pages, as before.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Callable

from mqstore.engine.log.mapped_file import OS_PAGE_SIZE, MappedFile

MADV_POPULATE_WRITE = 23  # linux/mman.h
DEFAULT_PREFAULT_STEP_BYTES = 1024 * 1024  # one madvise call: what a file close may wait for
DEFAULT_PREFAULT_AHEAD_BYTES = 8 * 1024 * 1024


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
        if not self.enabled or mf.closed or not mf.mapped:
            return 0  # unmapped meanwhile (idle: the process's open files let it go); never mapped from here
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
