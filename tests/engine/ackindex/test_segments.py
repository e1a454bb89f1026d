"""A segment's messages read back as its file and its journal slots show them together."""

from __future__ import annotations

from pathlib import Path

from mqstore.engine.ackindex.codec import PubRecord
from mqstore.engine.ackindex.files import SegmentFileCache, segment_path
from mqstore.engine.ackindex.segments import IndexEntry, Segment
from mqstore.engine.ackindex.slots import JournalSlot

PER_SEGMENT = 8


def pub(n: int) -> PubRecord:
    return PubRecord(bytes([n]) * 16, size_bytes=n)


def test_file_and_journal_read_back_together(tmp_path: Path) -> None:
    """Segment 1 (seq_ids 8..15): 8 delivered in an earlier run, 9 delivered since, 10 acked in the
    journal, 11 only in the journal, 12 published and acked in the file."""
    flushed = {0: JournalSlot(pub(8), delivered=True), 2: JournalSlot(pub(10)), 4: JournalSlot(pub(12), True, True)}
    earlier_run = b"".join(flushed[rel].encode(rel) for rel in sorted(flushed))
    this_run = JournalSlot(pub(9)).encode(1) + JournalSlot(None, delivered=True).encode(1)
    segment_path(tmp_path, 1).write_bytes(earlier_run + this_run)
    seg = Segment(1, unacked_count=3, slots={2: JournalSlot(None, True, True), 3: JournalSlot(pub(11))})
    seg.note_recovered_size(tmp_path)
    assert seg.recovered_size_bytes == len(earlier_run) + len(this_run)
    seg.recovered_size_bytes = len(earlier_run)  # as if 9's delivery came after the open
    files = SegmentFileCache(tmp_path, PER_SEGMENT, 2)
    view = seg.view(0, seg.slots.get(0), files)
    assert view is not None and (view.delivered, view.acked, view.redelivered) == (True, False, True)
    assert [(e.seq_id, e.delivered, e.redelivered) for e in seg.unacked(0, 100, files, PER_SEGMENT)] == [
        (8, True, True), (9, True, False), (11, False, False)]
    assert seg.unacked(10, 12, files, PER_SEGMENT) == [IndexEntry(11, pub(11).msg_id, 11, 0, None, False, False)]
    assert seg.unacked(0, 8, files, PER_SEGMENT) == seg.unacked(16, 24, files, PER_SEGMENT) == []
    assert seg.view(5, None, files) is None  # never published


def test_a_flush_appends_the_slots_in_rel_seq_order() -> None:
    seg = Segment(0, slots={3: JournalSlot(pub(3)), 1: JournalSlot(None, True, True)})
    assert seg.encode_slots() == JournalSlot(None, True, True).encode(1) + JournalSlot(pub(3)).encode(3)
