"""Recovery's arithmetic: journal records folded into slots, and a segment file's records taken out of
them, after a flush and after a flush that crashed before the journal was truncated."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine.ackindex.codec import (
    MAX_ENTRIES_PER_SEGMENT,
    JournalKind,
    JournalRecord,
    PubRecord,
    encode_segment_publish,
    parse_segment,
)
from mqstore.engine.ackindex.slots import JournalSlot, journal_minus_segment, replay_journal
from mqstore.engine.log.host import Host
from mqstore.engine.log.msgid import offset_msg_id

MSG_ID = bytes.fromhex(offset_msg_id(Host("10.0.0.5", 10911), 4096))
PUB = PubRecord(MSG_ID, expiry_ms=12345, size_bytes=10)


@dataclass(frozen=True, slots=True)
class Event:
    rel_seq: int
    kind: JournalKind


@st.composite
def histories(draw: st.DrawFn) -> list[Event]:
    """Events of up to 6 messages of one segment, each going publish -> deliver -> ack as far as
    drawn, interleaved in any order that keeps each message's own order."""
    stages = draw(st.lists(st.integers(1, 3), min_size=1, max_size=6))
    pending = [[Event(rel, kind) for kind in list(JournalKind)[:stage]] for rel, stage in enumerate(stages)]
    events: list[Event] = []
    while any(pending):
        choice = draw(st.sampled_from([i for i, p in enumerate(pending) if p]))
        events.append(pending[choice].pop(0))
    return events


def to_records(events: list[Event]) -> list[JournalRecord]:
    return [JournalRecord(e.kind, e.rel_seq, PubRecord(MSG_ID) if e.kind is JournalKind.PUBLISH else None)
            for e in events]


def segment_bytes(slots: dict[int, JournalSlot]) -> bytes:
    return b"".join(slots[rel].encode(rel) for rel in sorted(slots))


def unacked_view(data: bytes) -> dict[int, bool]:
    """rel_seq -> delivered, for every unacked entry a segment file holds."""
    return {rel: e.deliver_pos is not None for rel, e in parse_segment(data).entries.items() if not e.acked}


@given(histories(), st.data())
def test_recovery_arithmetic_after_a_flush_and_after_a_crashed_flush(events: list[Event], data: st.DataObject) -> None:
    """A flush at ``cut`` wrote the journal so far into the segment; the later events are in the
    journal. Replaying them over the segment gives the full history, and so does replaying them
    again after a crash that appended them to the segment but left the journal in place."""
    cut = data.draw(st.integers(0, len(events)))
    expected: dict[int, bool] = {}
    for e in events:
        if e.kind is JournalKind.PUBLISH:
            expected[e.rel_seq] = False
        elif e.kind is JournalKind.DELIVER:
            expected[e.rel_seq] = True
        else:
            del expected[e.rel_seq]
    flushed, _ = replay_journal(to_records(events[:cut]), MAX_ENTRIES_PER_SEGMENT)
    segment = segment_bytes(flushed.get(0, {}))
    journal, _ = replay_journal(to_records(events[cut:]), MAX_ENTRIES_PER_SEGMENT)
    journal_slots = journal.get(0, {})

    kept, unacked_count = journal_minus_segment(journal_slots, parse_segment(segment).entries)
    assert unacked_count == len(expected)
    assert unacked_view(segment + segment_bytes(kept)) == expected

    crashed = segment + segment_bytes(journal_slots)
    kept_again, unacked_again = journal_minus_segment(journal_slots, parse_segment(crashed).entries)
    assert unacked_again == len(expected)
    assert unacked_view(crashed + segment_bytes(kept_again)) == expected


def test_journal_ack_for_a_deleted_segment_is_dropped() -> None:
    """Reference §2.3 "missing segment": acks left in the journal by a flush that deleted the
    segment file and crashed before truncating the journal."""
    slots = {1: JournalSlot(None, True, True), 2: JournalSlot(None, False, True)}
    assert journal_minus_segment(slots, {}) == ({}, 0)


def test_journal_ack_without_delivery_gains_one() -> None:
    """Reference §2.3: journal {ack} over segment {pub} is rewritten to {del, ack}, because a lone
    2-byte record after the publish would read back as a delivery."""
    entries = parse_segment(encode_segment_publish(1, PUB)).entries
    kept, unacked_count = journal_minus_segment({1: JournalSlot(None, False, True)}, entries)
    assert kept == {1: JournalSlot(None, True, True)} and unacked_count == 0


@settings(max_examples=50)
@given(st.lists(st.tuples(st.sampled_from(JournalKind), st.integers(0, 7)), max_size=20))
def test_replay_never_raises_on_out_of_order_records(ops: list[tuple[JournalKind, int]]) -> None:
    records = [JournalRecord(kind, seq, PubRecord(MSG_ID) if kind is JournalKind.PUBLISH else None)
               for kind, seq in ops]
    by_segment, max_pub = replay_journal(records, 4)
    assert max_pub == max((s for k, s in ops if k is JournalKind.PUBLISH), default=-1)
    for slots in by_segment.values():
        for slot in slots.values():
            assert not (slot.pub is not None and slot.acked)
