"""The master's read-only view of its commitlog, for transfers: bytes straight from the mapped files.

``chunk`` gives a ``memoryview`` of the mapping itself (no copy); it never crosses a file (RocketMQ's
getCommitLogData stops at the file's end too) nor passes ``end`` (what the writer has published) or
``limit`` bytes. The caller sends it and releases it within the round: an exported view keeps the map
open (``BufferError`` on close), and the process's open files may unmap an idle file between rounds.
"""

from __future__ import annotations

from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import MappedFileError


class LogSource:
    def __init__(self, commitlog: CommitLog) -> None:
        self.commitlog = commitlog

    @property
    def min_offset(self) -> int:
        return self.commitlog.min_offset

    def chunk(self, phys_offset: int, end: int, limit: int) -> memoryview | None:
        """Bytes from ``phys_offset``, at most to ``end`` and ``limit`` bytes, within one file; None
        when no file holds ``phys_offset`` (deleted by retention, or not mapped here yet)."""
        if phys_offset >= end:
            return None
        queue = self.commitlog.queue
        mf = queue.find(phys_offset)
        if mf is None:
            queue.refresh()  # a file the writer made since, or retention deleted the first ones
            mf = queue.find(phys_offset)
        if mf is None:
            return None
        stop = min(end, mf.file_end, phys_offset + limit)
        try:
            buffer = mf.buffer
        except MappedFileError:
            return None  # deleted under us
        return memoryview(buffer)[phys_offset - mf.file_base:stop - mf.file_base]

    def close(self) -> None:
        self.commitlog.close()
