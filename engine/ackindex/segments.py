"""One segment of a queue index as memory holds it, and how its messages read back.

A segment is ``entries_per_segment`` consecutive seq_ids (``rel_seq = seq_id % entries_per_segment``).
Memory keeps, per segment with unacked messages or unflushed journal records, its unacked count and
its journal slots (``mqstore.engine.ackindex.slots``); what its file holds comes from the cache of parsed
segment files (``mqstore.engine.ackindex.files.SegmentFileCache``), read only when a message's publish is
no longer in the journal. A message reads back as file and journal show it together (``view``).

A delivery recorded in the segment file below the size the file had after recovery happened before
this open: whoever got it went with that run, so the message reads back ``redelivered``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from mqstore.engine.ackindex.codec import PubRecord
from mqstore.engine.ackindex.files import SegmentFileCache, segment_path
from mqstore.engine.ackindex.slots import EMPTY_SLOT, JournalSlot


@dataclass(frozen=True, slots=True)
class PublishEntry:
    seq_id: int
    msg_id: bytes  # 16 bytes: the offsetMsgId bytes of the commitlog record
    size_bytes: int
    expiry_ms: int = 0  # 0 = never expires
    body: bytes | None = None  # embedded in the index if shorter than embed_threshold_bytes


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """An unacked message. ``redelivered``: delivered before this open, so whoever got it is gone
    and it is due again, flagged. ``body`` is None unless the message was embedded."""

    seq_id: int
    msg_id: bytes
    size_bytes: int
    expiry_ms: int
    body: bytes | None
    delivered: bool
    redelivered: bool


class MessageView(NamedTuple):
    """One message as file and journal show it together."""

    pub: PubRecord
    delivered: bool
    acked: bool
    redelivered: bool  # delivered before this open


class Segment:
    __slots__ = ("num", "recovered_size_bytes", "slots", "unacked_count")

    def __init__(self, num: int, unacked_count: int = 0, slots: dict[int, JournalSlot] | None = None) -> None:
        self.num = num
        self.unacked_count = unacked_count  # published, not acked: file and journal together
        self.slots: dict[int, JournalSlot] = slots if slots is not None else {}
        # deliveries recorded below this file position happened before this open
        self.recovered_size_bytes = 0

    def note_recovered_size(self, directory: Path) -> None:
        """Take the size the segment file has now, after recovery, as the line below which a
        recorded delivery happened before this open."""
        try:
            self.recovered_size_bytes = os.stat(segment_path(directory, self.num)).st_size
        except FileNotFoundError:
            self.recovered_size_bytes = 0

    def encode_slots(self) -> bytes:
        """What a flush appends to the segment file: every journal slot's records, in rel_seq order."""
        return b"".join(self.slots[rel_seq].encode(rel_seq) for rel_seq in sorted(self.slots))

    def view(self, rel_seq: int, slot: JournalSlot | None, files: SegmentFileCache) -> MessageView | None:
        """The message at ``rel_seq`` with ``slot`` as its journal slot (the one in ``slots``, or one
        staged in its place); None if it was never published here or is gone (acked, then cancelled
        in the journal or deleted with its segment)."""
        if slot is not None and slot.pub is not None:
            return MessageView(slot.pub, slot.delivered, slot.acked, False)
        entry = files.get(self.num).get(rel_seq)
        if entry is None:
            return None
        in_journal = slot or EMPTY_SLOT
        earlier = entry.deliver_pos is not None and entry.deliver_pos < self.recovered_size_bytes
        return MessageView(entry.pub, entry.deliver_pos is not None or in_journal.delivered,
                           entry.acked or in_journal.acked, earlier)

    def unacked(self, start_seq_id: int, end_seq_id: int, files: SegmentFileCache,
                entries_per_segment: int) -> list[IndexEntry]:
        """The segment's unacked messages with start <= seq_id < end, in seq_id order."""
        base = self.num * entries_per_segment
        lo, hi = max(start_seq_id - base, 0), min(end_seq_id - base, entries_per_segment)
        if lo >= hi:
            return []
        in_file = files.get(self.num)
        if hi - lo <= len(in_file) + len(self.slots):
            rels: Iterable[int] = range(lo, hi)
        else:
            rels = sorted({r for r in in_file if lo <= r < hi} | {r for r in self.slots if lo <= r < hi})
        out: list[IndexEntry] = []
        for rel_seq in rels:
            view = self.view(rel_seq, self.slots.get(rel_seq), files)
            if view is None or view.acked:
                continue
            pub = view.pub
            out.append(IndexEntry(base + rel_seq, pub.msg_id, pub.size_bytes, pub.expiry_ms, pub.body,
                                  view.delivered, view.redelivered))
        return out
