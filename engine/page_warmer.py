"""Pages of the commitlog faulted in ahead of its writer (RocketMQ's warm-up of a new mapped file).

The first write to a page of a fresh, fallocated file costs a page fault that allocates and zeroes
the page: many times the cost of the copy itself, paid by the single writer on the send path. A
process other than the writer (the flush service) asks the kernel to populate the page cache for
the range just ahead of the written end (``madvise(MADV_POPULATE_READ)`` on its own read-only
mapping), so the writer's copy finds the pages there. Nothing is written and nothing is dirtied:
the bytes stay the zeros fallocate promised, and a reader or a recovery sees exactly what it would
have without the warming. Where the kernel lacks the advice (before Linux 5.14), warming is off.

Measured on the 2-core development machine: a 64 MiB copy into fresh pages takes a third of the
time after the advice; in the broker's 4 KiB benchmark the writer's CPU per message did not move
(13.7 us with, 13.8 without), so the first-write cost there is not the page allocation this saves.
"""

from __future__ import annotations

from pathlib import Path

from engine.mapped_file import OS_PAGE_SIZE
from engine.mapped_file_queue import MappedFileQueue

MADV_POPULATE_READ = 22  # linux/mman.h; Python's mmap module does not name it
DEFAULT_AHEAD_BYTES = 64 * 1024 * 1024
DEFAULT_STEP_BYTES = 4 * 1024 * 1024


class PageWarmer:
    def __init__(self, directory: Path, file_size: int, ahead_bytes: int = DEFAULT_AHEAD_BYTES,
                 step_bytes: int = DEFAULT_STEP_BYTES) -> None:
        self.queue = MappedFileQueue.open(directory, file_size, writable=False)
        self.ahead_bytes = ahead_bytes
        self.step_bytes = step_bytes
        self.warmed_to = 0
        self.enabled = ahead_bytes > 0

    def close(self) -> None:
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
        try:
            mf.buffer.madvise(MADV_POPULATE_READ, pos, length)
        except OSError:  # an older kernel: the writer faults its own pages, as before
            self.enabled = False
            return 0
        self.warmed_to = start + length
        return length
