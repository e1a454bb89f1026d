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

Given a bound (``mqstore produce`` passes the broker's largest message body, ``[store]
max_body_bytes``, RocketMQ's maxMessageSize), a line longer than it is refused rather than held: its
bytes are counted and dropped as they are read, so a stream without newlines never holds more than
the bound (and one read), and each batch names the lines refused since the one before.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Iterator
from typing import NamedTuple

READ_BYTES = 1 << 20  # one read syscall: many lines at a time from a file or a fast pipe


class TooLong(NamedTuple):
    """A line longer than the bound given: its number (the first line is 1) and its length in bytes."""

    number: int
    size_bytes: int


class LineBatch(NamedTuple):
    lines: list[bytes]
    idle: bool  # the stream had nothing more ready when this batch was cut (or it ended)
    too_long: tuple[TooLong, ...] = ()  # lines refused for their length since the batch before


def _ready(fd: int) -> bool:
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def line_batches(fd: int, max_count: int, max_bytes: int, max_line_bytes: int | None = None) -> Iterator[LineBatch]:
    """The lines read from ``fd`` until its end, ``max_count`` lines or ``max_bytes`` bytes a batch
    at most (a line longer than ``max_bytes`` is a batch of its own). A line longer than
    ``max_line_bytes`` is not kept: it is counted as it streams by (never more than the bound of it
    held) and named in ``too_long``, and the lines after it go on."""
    limit = max_line_bytes if max_line_bytes is not None else sys.maxsize
    pending = bytearray()  # the start of a line whose newline has not come yet
    skipped = -1  # the bytes so far of a line past the limit, dropped as they come; -1: not in one
    number = 0  # lines seen, refused ones included
    lines: list[bytes] = []
    too_long: list[TooLong] = []
    size = 0
    while True:
        chunk = os.read(fd, READ_BYTES)
        if not chunk:
            break
        parts = chunk.split(b"\n")
        tail = parts.pop()
        for part in parts:
            number += 1
            length = (skipped if skipped >= 0 else len(pending)) + len(part)
            if skipped >= 0 or length > limit:
                too_long.append(TooLong(number, length))
                skipped = -1
                pending.clear()
                continue
            if pending:
                pending += part
                part = bytes(pending)
                pending.clear()
            if len(lines) >= max_count or (lines and size + len(part) > max_bytes):
                yield LineBatch(lines, False, tuple(too_long))
                lines, too_long, size = [], [], 0
            lines.append(part)
            size += len(part)
        if skipped >= 0:
            skipped += len(tail)
        elif len(pending) + len(tail) > limit:
            skipped = len(pending) + len(tail)
            pending.clear()
        else:
            pending += tail
        if (lines or too_long) and not _ready(fd):
            yield LineBatch(lines, True, tuple(too_long))
            lines, too_long, size = [], [], 0
    if skipped >= 0:
        too_long.append(TooLong(number + 1, skipped))
    elif pending:
        if len(lines) >= max_count or (lines and size + len(pending) > max_bytes):
            yield LineBatch(lines, False, tuple(too_long))
            lines, too_long = [], []
        lines.append(bytes(pending))
    if lines or too_long:
        yield LineBatch(lines, True, tuple(too_long))
