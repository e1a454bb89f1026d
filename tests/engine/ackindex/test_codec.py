from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.ackindex.codec import (
    JOURNAL_OP_SIZE,
    JOURNAL_PUB_SIZE,
    MAX_ENTRIES_PER_SEGMENT,
    MAX_SEQ_ID,
    SEGMENT_PUB_SIZE,
    SEGMENT_REL_SIZE,
    DecodeStatus,
    JournalKind,
    JournalRecord,
    PubRecord,
    decode_journal_record,
    decode_segment_record,
    encode_journal_ack,
    encode_journal_deliver,
    encode_journal_publish,
    encode_segment_entry,
    encode_segment_publish,
    encode_segment_rel,
    parse_journal,
    parse_segment,
)
from mqstore.engine.log.host import Host
from mqstore.engine.log.msgid import offset_msg_id

# -- fixed vectors, written field by field from reference §1.3 / §1.4 ---------------------------------

# offsetMsgId of 10.0.0.5:10911 at phys_offset 4096: 0a000005 | 00002a9f | 0000000000001000
MSG_ID = bytes.fromhex(offset_msg_id(Host("10.0.0.5", 10911), 4096))
MSG_ID_HEX = "0a00000500002a9f0000000000001000"
PUB = PubRecord(MSG_ID, expiry_ms=12345, size_bytes=10)
# expiry 12345 = 0x3039 in 8 bytes, size 10 in 4 bytes, embedded length 0 in 4 bytes
PUB_BODY_HEX = MSG_ID_HEX + "0000000000003039" + "0000000a" + "00000000"


def test_msg_id_vector_is_the_offset_msg_id_bytes() -> None:
    assert MSG_ID.hex() == MSG_ID_HEX


@pytest.mark.parametrize(("encoded", "expected_hex"), [
    # prefix 10 = deliver, then the 62-bit seq_id
    (encode_journal_deliver(5), "8000000000000005"),
    (encode_journal_deliver(MAX_SEQ_ID), "bfffffffffffffff"),
    # prefix 11 = ack
    (encode_journal_ack(5), "c000000000000005"),
    (encode_journal_ack(MAX_SEQ_ID), "ffffffffffffffff"),
    # prefix 00 = persistent publish; then msg id, expiry, size, embedded length
    (encode_journal_publish(0x0102030405060708, PUB), "0102030405060708" + PUB_BODY_HEX),
    # prefix 01 = transient publish
    (encode_journal_publish(7, PubRecord(MSG_ID, 12345, 10, persistent=False)), "4000000000000007" + PUB_BODY_HEX),
    # embedded message: length 3, then the bytes
    (encode_journal_publish(1, PubRecord(MSG_ID, 0, 3, b"abc")),
     "0000000000000001" + MSG_ID_HEX + "0000000000000000" + "00000003" + "00000003" + "616263"),
])
def test_journal_fixed_vectors(encoded: bytes, expected_hex: str) -> None:
    assert encoded.hex() == expected_hex
    decoded = decode_journal_record(encoded)
    assert decoded.status is DecodeStatus.RECORD
    assert decoded.size == len(encoded)


def test_journal_record_sizes() -> None:
    assert len(encode_journal_deliver(1)) == len(encode_journal_ack(1)) == JOURNAL_OP_SIZE == 8
    assert len(encode_journal_publish(1, PUB)) == JOURNAL_PUB_SIZE == 40
    assert len(encode_journal_publish(1, PubRecord(MSG_ID, body=b"x" * 100))) == 140


@pytest.mark.parametrize(("encoded", "expected_hex"), [
    # 1 (publish) | 1 (persistent) | 14-bit rel_seq 3 = 0b1100000000000011
    (encode_segment_publish(3, PUB), "c003" + PUB_BODY_HEX),
    # 1 | 0 (transient) | rel_seq 16383 = 0b1011111111111111
    (encode_segment_publish(16383, PubRecord(MSG_ID, 12345, 10, persistent=False)), "bfff" + PUB_BODY_HEX),
    (encode_segment_publish(0, PubRecord(MSG_ID, 0, 3, b"abc")),
     "c000" + MSG_ID_HEX + "0000000000000000" + "00000003" + "00000003" + "616263"),
    # 01 | rel_seq: deliver and ack are the same two bytes
    (encode_segment_rel(3), "4003"),
    (encode_segment_rel(16383), "7fff"),
    # a journal entry holding publish, deliver and ack of one rel_seq: publish, then two 2-byte records
    (encode_segment_entry(3, PUB, 2), "c003" + PUB_BODY_HEX + "4003" + "4003"),
    (encode_segment_entry(3, None, 1), "4003"),
])
def test_segment_fixed_vectors(encoded: bytes, expected_hex: str) -> None:
    assert encoded.hex() == expected_hex


def test_segment_record_sizes() -> None:
    assert len(encode_segment_rel(1)) == SEGMENT_REL_SIZE == 2
    assert len(encode_segment_publish(1, PUB)) == SEGMENT_PUB_SIZE == 34


def test_segment_del_and_ack_are_positional() -> None:
    pub = encode_segment_publish(3, PUB)
    delivered = parse_segment(pub + encode_segment_rel(3)).entries[3]
    assert delivered.deliver_pos == len(pub) and not delivered.acked
    acked = parse_segment(pub + encode_segment_rel(3) * 2).entries[3]
    assert acked.deliver_pos == len(pub) and acked.acked
    assert parse_segment(pub).entries[3].deliver_pos is None


def test_segment_stray_records_are_counted_not_applied() -> None:
    pub = encode_segment_publish(5, PUB)
    data = encode_segment_rel(5) + pub + encode_segment_rel(5) * 3 + pub
    parsed = parse_segment(data)
    assert parsed.stray_count == 3  # the rel before the publish, the third rel, the second publish
    assert parsed.entries[5].acked
    assert parsed.valid_bytes == len(data) and parsed.stop is DecodeStatus.END


def test_all_zero_journal_publish_stops_the_parse() -> None:
    """Reference §1.3: a publish-shaped record of 40 zero bytes is zero fill, not seq_id 0."""
    first = encode_journal_deliver(3)
    data = first + bytes(JOURNAL_PUB_SIZE) + encode_journal_ack(3)
    parsed = parse_journal(data)
    assert [r.kind for r in parsed.records] == [JournalKind.DELIVER]
    assert parsed.valid_bytes == len(first) and parsed.stop is DecodeStatus.ZERO_FILL
    with pytest.raises(ValueError, match="zero fill"):
        encode_journal_publish(0, PubRecord(bytes(16)))
    # one non-zero bit anywhere makes it a record: seq_id 0 with a real msg id is fine
    assert parse_journal(encode_journal_publish(0, PUB)).records[0].seq_id == 0


def test_segment_record_starting_with_00_is_invalid() -> None:
    assert decode_segment_record(bytes(2)).status is DecodeStatus.INVALID
    parsed = parse_segment(encode_segment_publish(1, PUB) + bytes(40))
    assert parsed.stop is DecodeStatus.INVALID and parsed.valid_bytes == SEGMENT_PUB_SIZE


def test_segment_rel_seq_outside_the_geometry_is_invalid() -> None:
    assert decode_segment_record(encode_segment_rel(4), 0, entries_per_segment=4).status is DecodeStatus.INVALID
    assert decode_segment_record(encode_segment_rel(3), 0, entries_per_segment=4).status is DecodeStatus.RECORD


@pytest.mark.parametrize("bad", [
    lambda: PubRecord(b"short"),
    lambda: PubRecord(MSG_ID, expiry_ms=-1),
    lambda: PubRecord(MSG_ID, size_bytes=1 << 32),
    lambda: PubRecord(MSG_ID, body=b""),
    lambda: encode_journal_deliver(MAX_SEQ_ID + 1),
    lambda: encode_journal_ack(-1),
    lambda: encode_segment_rel(MAX_ENTRIES_PER_SEGMENT),
    lambda: encode_segment_entry(0, None, 3),
])
def test_encoders_refuse_what_the_format_cannot_hold(bad: object) -> None:
    with pytest.raises(ValueError):
        bad()  # type: ignore[operator]


# -- property tests -----------------------------------------------------------------------------------

pubs = st.builds(
    PubRecord,
    msg_id=st.binary(min_size=16, max_size=16),
    expiry_ms=st.integers(0, 2**64 - 1),
    size_bytes=st.integers(0, 2**32 - 1),
    body=st.none() | st.binary(min_size=1, max_size=64),
    persistent=st.booleans(),
)
seq_ids = st.integers(0, MAX_SEQ_ID)


@st.composite
def journal_records(draw: st.DrawFn) -> JournalRecord:
    kind = draw(st.sampled_from(JournalKind))
    seq_id = draw(seq_ids)
    if kind is not JournalKind.PUBLISH:
        return JournalRecord(kind, seq_id)
    pub = draw(pubs)
    if seq_id == 0 and pub == PubRecord(bytes(16)):
        seq_id = 1  # the one record the format cannot hold
    return JournalRecord(kind, seq_id, pub)


def encode_journal(record: JournalRecord) -> bytes:
    if record.kind is JournalKind.DELIVER:
        return encode_journal_deliver(record.seq_id)
    if record.kind is JournalKind.ACK:
        return encode_journal_ack(record.seq_id)
    assert record.pub is not None
    return encode_journal_publish(record.seq_id, record.pub)


@given(st.lists(journal_records(), max_size=8))
def test_journal_round_trip(records: list[JournalRecord]) -> None:
    data = b"".join(encode_journal(r) for r in records)
    parsed = parse_journal(data)
    assert parsed.records == records
    assert parsed.valid_bytes == len(data) and parsed.stop is DecodeStatus.END


@given(journal_records())
def test_every_truncated_journal_record_is_incomplete(record: JournalRecord) -> None:
    data = encode_journal(record)
    assert decode_journal_record(data[:0]).status is DecodeStatus.END
    for cut in range(1, len(data)):
        assert decode_journal_record(data[:cut]).status is DecodeStatus.INCOMPLETE


@given(st.lists(journal_records(), min_size=1, max_size=6), st.data())
def test_a_torn_journal_keeps_exactly_the_whole_records(records: list[JournalRecord], data: st.DataObject) -> None:
    encoded = [encode_journal(r) for r in records]
    blob = b"".join(encoded)
    cut = data.draw(st.integers(0, len(blob)))
    parsed = parse_journal(blob[:cut])
    ends = [sum(len(e) for e in encoded[:i + 1]) for i in range(len(encoded))]
    whole = sum(1 for end in ends if end <= cut)
    assert parsed.records == records[:whole]
    assert parsed.valid_bytes == (ends[whole - 1] if whole else 0)


@given(st.integers(0, MAX_ENTRIES_PER_SEGMENT - 1), pubs, st.integers(0, 2))
def test_segment_round_trip_and_truncation(rel_seq: int, pub: PubRecord, rel_record_count: int) -> None:
    data = encode_segment_entry(rel_seq, pub, rel_record_count)
    parsed = parse_segment(data)
    entry = parsed.entries[rel_seq]
    assert entry.pub == pub and parsed.valid_bytes == len(data)
    assert (entry.deliver_pos is not None) == (rel_record_count >= 1)
    assert entry.acked == (rel_record_count == 2)
    record = encode_segment_publish(rel_seq, pub)
    for cut in range(1, len(record)):
        assert decode_segment_record(record[:cut]).status is DecodeStatus.INCOMPLETE
    assert decode_segment_record(encode_segment_rel(rel_seq)[:1]).status is DecodeStatus.INCOMPLETE


@given(st.binary(max_size=200), st.integers(1, MAX_ENTRIES_PER_SEGMENT))
def test_arbitrary_bytes_never_raise(data: bytes, entries_per_segment: int) -> None:
    journal = parse_journal(data)
    assert 0 <= journal.valid_bytes <= len(data)
    segment = parse_segment(data, entries_per_segment)
    assert 0 <= segment.valid_bytes <= len(data)
    for pos in range(len(data)):
        decode_journal_record(data, pos)
        decode_segment_record(data, pos, entries_per_segment)
