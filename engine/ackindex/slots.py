"""What the journal holds per rel_seq, and recovery's arithmetic over journal and segment file.

Memory mirrors the journal as one ``JournalSlot`` per rel_seq of a segment, RabbitMQ's journal
array: the publish if the journal holds it, and whether a delivery and an ack are. A flush appends
each slot's records to the segment file (``JournalSlot.encode``). On a dirty open the journal's
records are folded into slots again (``replay_journal``) and what a crashed flush had already
appended is taken out (``journal_minus_segment``). Pure functions over ``mqstore.engine.ackindex.codec``'s
records; ``mqstore.engine.ackindex.files`` runs recovery with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mqstore.engine.ackindex.codec import JournalKind, JournalRecord, PubRecord, SegmentEntry, encode_segment_entry


@dataclass(frozen=True, slots=True)
class JournalSlot:
    """What the journal holds for one rel_seq since the last flush (RabbitMQ's journal array slot):
    the publish if it is in the journal, and whether a delivery and an ack are."""

    pub: PubRecord | None = None
    delivered: bool = False
    acked: bool = False

    def encode(self, rel_seq: int) -> bytes:
        """The bytes a flush appends to the segment for this slot."""
        return encode_segment_entry(rel_seq, self.pub, self.delivered + self.acked)


EMPTY_SLOT = JournalSlot()
SlotsBySegment = dict[int, dict[int, JournalSlot]]


def replay_journal(records: Iterable[JournalRecord], entries_per_segment: int) -> tuple[SlotsBySegment, int]:
    """Fold journal records into slots per segment, as memory held them before the crash; returns
    them with the highest published seq_id (-1 if none).

    A publish and its ack in the same journal cancel out: nothing of the message need reach a
    segment (RabbitMQ also cancels a publish acked without a delivery). Records out of the
    publish -> deliver -> ack order are kept as flags; ``journal_minus_segment`` sorts them out.
    """
    by_segment: SlotsBySegment = {}
    max_pub_seq_id = -1
    for record in records:
        segment, rel_seq = divmod(record.seq_id, entries_per_segment)
        slots = by_segment.setdefault(segment, {})
        slot = slots.get(rel_seq, EMPTY_SLOT)
        if record.kind is JournalKind.PUBLISH:
            max_pub_seq_id = max(max_pub_seq_id, record.seq_id)
            if slot.pub is None:
                slot = JournalSlot(record.pub, slot.delivered, slot.acked)
        elif record.kind is JournalKind.DELIVER:
            slot = JournalSlot(slot.pub, True, slot.acked)
        else:
            slot = JournalSlot(slot.pub, slot.delivered, True)
        if slot.pub is not None and slot.acked:
            slots.pop(rel_seq, None)
        else:
            slots[rel_seq] = slot
    return by_segment, max_pub_seq_id


def journal_minus_segment(slots: dict[int, JournalSlot], entries: dict[int, SegmentEntry]
                          ) -> tuple[dict[int, JournalSlot], int]:
    """Drop from replayed journal slots what the segment file already holds (a crash between a
    flush's appends and its journal truncation), and count the unacked messages of both together.

    A delivery or ack with no publish in either refers to a message whose fully acked segment was
    deleted by that flush: dropped. An ack with no delivery anywhere gets its delivery, because a
    segment tells the two apart by position only.
    """
    kept: dict[int, JournalSlot] = {}
    unacked_count = 0
    for rel_seq in slots.keys() | entries.keys():
        slot = slots.get(rel_seq, EMPTY_SLOT)
        entry = entries.get(rel_seq)
        if entry is None and slot.pub is None:
            continue
        file_delivered = entry is not None and entry.deliver_pos is not None
        file_acked = entry is not None and entry.acked
        acked = file_acked or slot.acked
        delivered = file_delivered or slot.delivered or acked
        if not acked:
            unacked_count += 1
        remaining = JournalSlot(slot.pub if entry is None else None,
                                delivered and not file_delivered, acked and not file_acked)
        if remaining != EMPTY_SLOT:
            kept[rel_seq] = remaining
    return kept, unacked_count
