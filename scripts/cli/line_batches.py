"""Lines of a stream as message bodies, in batches: what ``mqstore produce`` sends from stdin or ``--file``.

A body is the bytes between two ``\\n``, exactly: nothing decoded, nothing else stripped (a ``\\r``
before the ``\\n`` stays in the body, an empty line is an empty body, bytes that are not UTF-8 are
sent as they are). A last line without a ``\\n`` is a body too; input that ends with ``\\n`` has no
empty body after it.

Batches are cut at ``max_count`` lines or ``max_bytes`` bytes, and whenever the stream has nothing
more ready to read (``select`` with no wait): a file or a fast pipe fills whole batches, a line typed
into a pipe goes out at once instead of waiting for others to fill its batch. Each batch says
whether the stream was idle as it was cut, so the sender can wait for what it has in flight then
rather than when the next line comes.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from typing import NamedTuple

READ_BYTES = 1 << 20  # one read syscall: many lines at a time from a file or a fast pipe


class LineBatch(NamedTuple):
    lines: list[bytes]
    idle: bool  # the stream had nothing more ready when this batch was cut (or it ended)


def _ready(fd: int) -> bool:
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def line_batches(fd: int, max_count: int, max_bytes: int) -> Iterator[LineBatch]:
    """The lines read from ``fd`` until its end, ``max_count`` lines or ``max_bytes`` bytes a batch
    at most (a line longer than ``max_bytes`` is a batch of its own)."""
    pending = bytearray()  # the start of a line whose newline has not come yet
    lines: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, READ_BYTES)
        if not chunk:
            break
        parts = chunk.split(b"\n")
        if pending and len(parts) > 1:
            pending += parts[0]
            parts[0] = bytes(pending)
            pending.clear()
        pending += parts.pop()
        for line in parts:
            if len(lines) >= max_count or (lines and size + len(line) > max_bytes):
                yield LineBatch(lines, False)
                lines, size = [], 0
            lines.append(line)
            size += len(line)
        if lines and not _ready(fd):
            yield LineBatch(lines, True)
            lines, size = [], 0
    if pending:
        if len(lines) >= max_count or (lines and size + len(pending) > max_bytes):
            yield LineBatch(lines, False)
            lines = []
        lines.append(bytes(pending))
    if lines:
        yield LineBatch(lines, True)
