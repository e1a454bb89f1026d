"""A consume-queue entry: its bytes, and the one rule for what an entry says.

Entry (big-endian), at byte ``queue_offset * 20`` of ``consumequeue/{topic}/{queueId}/``:

    pos  size  field
      0     8  phys_offset   commitlog offset of the record
      8     4  size          the record's TOTALSIZE
     12     8  tags_code     Java hash of TAGS (or delivery time of a delayed message)

An entry is **valid** when ``phys_offset >= 0 and size > 0``: the builder appends in order into
zeroed files, so a queue's entries end at its first entry that is not valid (a zeroed slot past the
builder's end, or a torn one). A valid entry **holds a message** unless it is a filler
``[0][0x7FFFFFFF][0]``: a queue whose first entry has a non-zero queue offset starts with fillers below
its min offset (RocketMQ's pre-blank). A message entry is **live** while retention has not taken its
record: its ``phys_offset`` is at or past the commitlog's min offset.

Each rule is one expression that takes Python ints (one entry) or numpy columns (a batch of them)
alike, so the scalar and the columnar paths cannot drift apart.
"""

from __future__ import annotations

import struct
from typing import Any, overload

import numpy as np
import numpy.typing as npt

CQ_ENTRY_SIZE = 20
FILLER_SIZE = 0x7FFFFFFF
CQ_DTYPE = np.dtype([("phys_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
ENTRY = struct.Struct(">qiq")

CqEntries = npt.NDArray[np.void]
Column = npt.NDArray[Any]
Mask = npt.NDArray[np.bool_]


def encode_entry(phys_offset: int, size: int, tags_code: int) -> bytes:
    return ENTRY.pack(phys_offset, size, tags_code)


def decode_entry(data: bytes | memoryview) -> tuple[int, int, int]:
    phys_offset, size, tags_code = ENTRY.unpack(data)
    return int(phys_offset), int(size), int(tags_code)


@overload
def entry_valid(phys_offset: int, size: int) -> bool: ...
@overload
def entry_valid(phys_offset: Column, size: Column) -> Mask: ...
def entry_valid(phys_offset: Any, size: Any) -> Any:
    """The entry points at a record: ``phys_offset >= 0 and size > 0`` (a filler counts: it holds a place)."""
    return (phys_offset >= 0) & (size > 0)


@overload
def entry_holds_message(phys_offset: int, size: int) -> bool: ...
@overload
def entry_holds_message(phys_offset: Column, size: Column) -> Mask: ...
def entry_holds_message(phys_offset: Any, size: Any) -> Any:
    """A valid entry that is no filler: it stands for one message."""
    return entry_valid(phys_offset, size) & (size != FILLER_SIZE)


@overload
def entry_live(phys_offset: int, size: int, min_phys_offset: int) -> bool: ...
@overload
def entry_live(phys_offset: Column, size: Column, min_phys_offset: int) -> Mask: ...
def entry_live(phys_offset: Any, size: Any, min_phys_offset: int) -> Any:
    """A message entry whose record is still in the commitlog (retention deletes below its min offset)."""
    return entry_holds_message(phys_offset, size) & (phys_offset >= min_phys_offset)


def valid_prefix(entries: CqEntries) -> int:
    """How many of ``entries`` lead before the first one that is not valid: where a queue ends."""
    valid = entry_valid(entries["phys_offset"], entries["size"])
    return len(entries) if bool(valid.all()) else int(np.argmin(valid))


def message_bytes(entries: CqEntries) -> int:
    """The bytes the records of ``entries``' messages take in the commitlog: each entry's size (the
    record's TOTALSIZE) summed over those that hold a message. Exact, and read from the consume queue
    alone."""
    sizes = entries["size"]
    held = entry_holds_message(entries["phys_offset"], sizes)
    return int(sizes[held].astype(np.int64).sum())
