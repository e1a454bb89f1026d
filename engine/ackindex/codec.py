"""Byte codecs of RabbitMQ's classic (v1) queue index: the journal ``journal.jif`` and the segment
files ``{segment}.idx``. Pure functions over bytes and records; ``mqstore.engine.ackindex.queue_index`` owns the
files, and ``mqstore.engine.ackindex.slots`` combines records (the journal slot per rel_seq, and recovery's
arithmetic).

Fields are packed most significant bit first and integers are big-endian unsigned (Erlang's bit
syntax, which RabbitMQ writes them with). ``seq_id`` is the absolute sequence id (mqstore: the
message's consume-queue offset); ``rel_seq = seq_id % entries_per_segment`` (at most 2**14).

Journal record::

    pos  size     field
      0  2 bits   prefix  00 publish (persistent), 01 publish (transient), 10 deliver, 11 ack
      0  62 bits  seq_id
    ---- 8        a deliver or ack record ends here
      8  16 B     msg_id        mqstore: the 16 offsetMsgId bytes (IPv4 store host + phys_offset)
     24   8 B     expiry_ms     0 = never expires
     32   4 B     size_bytes    payload size, for statistics only
     36   4 B     embedded_len  L; 0 = the message lives in the message store (the commitlog)
     40   L B     embedded message bytes
    ---- 40 + L   a publish record ends here

Segment record::

    publish                                 deliver or ack (byte-identical)
    pos  size     field                     pos  size     field
      0  1 bit    1                           0  2 bits   01
      0  1 bit    persistent                  0  14 bits  rel_seq
      0  14 bits  rel_seq                   ---- 2
      2  16 B     msg_id
     18   8 B     expiry_ms
     26   4 B     size_bytes
     30   4 B     embedded_len L
     34   L B     embedded message bytes
    ---- 34 + L

Deliver and ack are told apart by position only: the first 2-byte record of a ``rel_seq`` after
its publish in the same file is the delivery, the second the ack. ``encode_segment_entry`` therefore
writes an ack on a never-delivered entry as two records.

Parsing stops silently at the first record the buffer does not hold whole (a torn tail), at a
journal publish whose 40 header bytes are all zero (zero fill left by a dirty shutdown; an encoder
refuses to write that record), and at a segment record that starts with the bits ``00`` (no record
does). Neither format has a checksum (RabbitMQ's v2 index added one): corruption other than a torn
or zeroed tail is not detected. In particular a record whose first bytes reached the disk and whose
rest reads back as zeros (a power cut at a sector boundary, on a filesystem that exposes unwritten
sectors inside the file size) parses as a different record; a process crash cannot produce that.
Recovery checks each journal publish against the message store for that reason
(``mqstore.engine.ackindex.files``).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

JOURNAL_OP_SIZE = 8
JOURNAL_PUB_SIZE = 40
SEGMENT_REL_SIZE = 2
SEGMENT_PUB_SIZE = 34
MSG_ID_SIZE = 16
SEQ_BITS = 62
REL_SEQ_BITS = 14
MAX_SEQ_ID = (1 << SEQ_BITS) - 1
MAX_ENTRIES_PER_SEGMENT = 1 << REL_SEQ_BITS
MAX_EXPIRY_MS = (1 << 64) - 1
MAX_SIZE_BYTES = (1 << 32) - 1

_JOURNAL_HEAD = struct.Struct(">Q")
_PUB_BODY = struct.Struct(">16sQII")  # msg_id, expiry_ms, size_bytes, embedded_len
_SEGMENT_HEAD = struct.Struct(">H")
_SEQ_MASK = MAX_SEQ_ID
_REL_SEQ_MASK = MAX_ENTRIES_PER_SEGMENT - 1
_SEGMENT_PUB_BIT = 0x8000
_SEGMENT_PERSISTENT_BIT = 0x4000
_SEGMENT_REL_PREFIX = 0x4000
_ZERO_PUB_BODY = bytes(_PUB_BODY.size)

ByteSource = bytes | bytearray | memoryview


class JournalPrefix(enum.IntEnum):
    PUBLISH_PERSISTENT = 0b00
    PUBLISH_TRANSIENT = 0b01
    DELIVER = 0b10
    ACK = 0b11


class JournalKind(enum.Enum):
    PUBLISH = "publish"
    DELIVER = "deliver"
    ACK = "ack"


class DecodeStatus(enum.Enum):
    RECORD = "record"
    END = "end"  # nothing left at pos
    INCOMPLETE = "incomplete"  # the buffer ends inside the record: a torn tail
    ZERO_FILL = "zero_fill"  # an all-zero journal publish header
    INVALID = "invalid"  # a segment record starting with 00, or a rel_seq outside the segment


@dataclass(frozen=True, slots=True)
class PubRecord:
    """What a publish carries in both files. ``body`` is the embedded message, None when the
    message lives in the message store (an embedded length of 0, so an empty body cannot be
    embedded)."""

    msg_id: bytes
    expiry_ms: int = 0
    size_bytes: int = 0
    body: bytes | None = None
    persistent: bool = True

    def __post_init__(self) -> None:
        if len(self.msg_id) != MSG_ID_SIZE:
            raise ValueError(f"msg_id must be {MSG_ID_SIZE} bytes, got {len(self.msg_id)}")
        if not 0 <= self.expiry_ms <= MAX_EXPIRY_MS:
            raise ValueError(f"expiry_ms {self.expiry_ms} outside 0..2**64-1")
        if not 0 <= self.size_bytes <= MAX_SIZE_BYTES:
            raise ValueError(f"size_bytes {self.size_bytes} outside 0..2**32-1")
        if self.body is not None and not 0 < len(self.body) <= MAX_SIZE_BYTES:
            raise ValueError(f"an embedded body must hold 1..2**32-1 bytes, got {len(self.body)}")


@dataclass(frozen=True, slots=True)
class JournalRecord:
    kind: JournalKind
    seq_id: int
    pub: PubRecord | None = None


@dataclass(frozen=True, slots=True)
class JournalDecoded:
    status: DecodeStatus
    size: int = 0
    record: JournalRecord | None = None


@dataclass(frozen=True, slots=True)
class SegmentDecoded:
    """One segment record: a publish (``pub`` set) or a deliver-or-ack (``pub`` None)."""

    status: DecodeStatus
    size: int = 0
    rel_seq: int = 0
    pub: PubRecord | None = None


@dataclass(frozen=True, slots=True)
class JournalParse:
    records: list[JournalRecord]
    valid_bytes: int  # the whole records end here; anything after is ignored
    stop: DecodeStatus


@dataclass(frozen=True, slots=True)
class SegmentEntry:
    """A segment file's view of one rel_seq. ``deliver_pos`` is the byte position of its delivery
    record, which tells a delivery of an earlier run (below the size the file had at open)."""

    pub: PubRecord
    deliver_pos: int | None = None
    acked: bool = False


@dataclass(frozen=True, slots=True)
class SegmentParse:
    entries: dict[int, SegmentEntry]
    valid_bytes: int
    stop: DecodeStatus
    stray_count: int = 0  # deliver/ack with no publish before it, a third one, a second publish


def _check_seq_id(seq_id: int) -> None:
    if not 0 <= seq_id <= MAX_SEQ_ID:
        raise ValueError(f"seq_id {seq_id} outside 0..2**62-1")


def _check_rel_seq(rel_seq: int) -> None:
    if not 0 <= rel_seq < MAX_ENTRIES_PER_SEGMENT:
        raise ValueError(f"rel_seq {rel_seq} outside 0..{MAX_ENTRIES_PER_SEGMENT - 1}")


def _pub_body(pub: PubRecord) -> bytes:
    body = pub.body or b""
    return _PUB_BODY.pack(pub.msg_id, pub.expiry_ms, pub.size_bytes, len(body)) + body


# --- journal -------------------------------------------------------------------------------------


def encode_journal_publish(seq_id: int, pub: PubRecord) -> bytes:
    _check_seq_id(seq_id)
    prefix = JournalPrefix.PUBLISH_PERSISTENT if pub.persistent else JournalPrefix.PUBLISH_TRANSIENT
    head = _JOURNAL_HEAD.pack((prefix << SEQ_BITS) | seq_id)
    body = _pub_body(pub)
    if head == bytes(JOURNAL_OP_SIZE) and body == _ZERO_PUB_BODY:
        # the parser reads this record as zero fill and stops: it could never be read back
        raise ValueError("an all-zero publish of seq_id 0 is indistinguishable from zero fill")
    return head + body


def encode_journal_deliver(seq_id: int) -> bytes:
    _check_seq_id(seq_id)
    return _JOURNAL_HEAD.pack((JournalPrefix.DELIVER << SEQ_BITS) | seq_id)


def encode_journal_ack(seq_id: int) -> bytes:
    _check_seq_id(seq_id)
    return _JOURNAL_HEAD.pack((JournalPrefix.ACK << SEQ_BITS) | seq_id)


def decode_journal_record(buf: ByteSource, pos: int = 0) -> JournalDecoded:
    """Decode the journal record at ``pos``; never raises on bad bytes."""
    available = len(buf) - pos
    if available <= 0:
        return JournalDecoded(DecodeStatus.END)
    if available < JOURNAL_OP_SIZE:
        return JournalDecoded(DecodeStatus.INCOMPLETE)
    (head,) = _JOURNAL_HEAD.unpack_from(buf, pos)
    prefix, seq_id = head >> SEQ_BITS, head & _SEQ_MASK
    if prefix == JournalPrefix.DELIVER:
        return JournalDecoded(DecodeStatus.RECORD, JOURNAL_OP_SIZE, JournalRecord(JournalKind.DELIVER, seq_id))
    if prefix == JournalPrefix.ACK:
        return JournalDecoded(DecodeStatus.RECORD, JOURNAL_OP_SIZE, JournalRecord(JournalKind.ACK, seq_id))
    if available < JOURNAL_PUB_SIZE:
        return JournalDecoded(DecodeStatus.INCOMPLETE)
    msg_id, expiry_ms, size_bytes, embedded_len = _PUB_BODY.unpack_from(buf, pos + JOURNAL_OP_SIZE)
    if head == 0 and msg_id == bytes(MSG_ID_SIZE) and expiry_ms == 0 and size_bytes == 0 and embedded_len == 0:
        return JournalDecoded(DecodeStatus.ZERO_FILL)
    size = JOURNAL_PUB_SIZE + embedded_len
    if available < size:
        return JournalDecoded(DecodeStatus.INCOMPLETE)
    body = bytes(buf[pos + JOURNAL_PUB_SIZE:pos + size]) if embedded_len else None
    pub = PubRecord(msg_id, expiry_ms, size_bytes, body, prefix == JournalPrefix.PUBLISH_PERSISTENT)
    return JournalDecoded(DecodeStatus.RECORD, size, JournalRecord(JournalKind.PUBLISH, seq_id, pub))


def parse_journal(buf: ByteSource) -> JournalParse:
    """Every whole record from the start of ``buf``, stopping at the first that is not."""
    records: list[JournalRecord] = []
    pos = 0
    while True:
        decoded = decode_journal_record(buf, pos)
        if decoded.record is None:
            return JournalParse(records, pos, decoded.status)
        records.append(decoded.record)
        pos += decoded.size


# --- segment -------------------------------------------------------------------------------------


def encode_segment_publish(rel_seq: int, pub: PubRecord) -> bytes:
    _check_rel_seq(rel_seq)
    head = _SEGMENT_PUB_BIT | (_SEGMENT_PERSISTENT_BIT if pub.persistent else 0) | rel_seq
    return _SEGMENT_HEAD.pack(head) + _pub_body(pub)


def encode_segment_rel(rel_seq: int) -> bytes:
    """A deliver or an ack record: the two are the same bytes."""
    _check_rel_seq(rel_seq)
    return _SEGMENT_HEAD.pack(_SEGMENT_REL_PREFIX | rel_seq)


def encode_segment_entry(rel_seq: int, pub: PubRecord | None, rel_record_count: int) -> bytes:
    """What one flush appends for a rel_seq: its publish if the journal held it, then one 2-byte
    record per delivery or ack the journal held (RabbitMQ's ``entry_to_segment``)."""
    if not 0 <= rel_record_count <= 2:
        raise ValueError(f"a segment entry has at most a deliver and an ack, not {rel_record_count}")
    head = encode_segment_publish(rel_seq, pub) if pub is not None else b""
    return head + encode_segment_rel(rel_seq) * rel_record_count


def decode_segment_record(buf: ByteSource, pos: int = 0,
                          entries_per_segment: int = MAX_ENTRIES_PER_SEGMENT) -> SegmentDecoded:
    """Decode the segment record at ``pos``; never raises on bad bytes."""
    available = len(buf) - pos
    if available <= 0:
        return SegmentDecoded(DecodeStatus.END)
    if available < SEGMENT_REL_SIZE:
        return SegmentDecoded(DecodeStatus.INCOMPLETE)
    (head,) = _SEGMENT_HEAD.unpack_from(buf, pos)
    rel_seq = head & _REL_SEQ_MASK
    if not head & (_SEGMENT_PUB_BIT | _SEGMENT_REL_PREFIX) or rel_seq >= entries_per_segment:
        return SegmentDecoded(DecodeStatus.INVALID)
    if not head & _SEGMENT_PUB_BIT:
        return SegmentDecoded(DecodeStatus.RECORD, SEGMENT_REL_SIZE, rel_seq)
    if available < SEGMENT_PUB_SIZE:
        return SegmentDecoded(DecodeStatus.INCOMPLETE)
    msg_id, expiry_ms, size_bytes, embedded_len = _PUB_BODY.unpack_from(buf, pos + SEGMENT_REL_SIZE)
    size = SEGMENT_PUB_SIZE + embedded_len
    if available < size:
        return SegmentDecoded(DecodeStatus.INCOMPLETE)
    body = bytes(buf[pos + SEGMENT_PUB_SIZE:pos + size]) if embedded_len else None
    pub = PubRecord(msg_id, expiry_ms, size_bytes, body, bool(head & _SEGMENT_PERSISTENT_BIT))
    return SegmentDecoded(DecodeStatus.RECORD, size, rel_seq, pub)


def parse_segment(buf: ByteSource, entries_per_segment: int = MAX_ENTRIES_PER_SEGMENT) -> SegmentParse:
    """Every rel_seq the file holds, acked ones included, read positionally; stops like the journal."""
    pubs: dict[int, PubRecord] = {}
    rel_positions: dict[int, list[int]] = {}
    stray_count = 0
    pos = 0
    while True:
        decoded = decode_segment_record(buf, pos, entries_per_segment)
        if decoded.status is not DecodeStatus.RECORD:
            break
        rel_seq = decoded.rel_seq
        if decoded.pub is not None:
            if rel_seq in pubs:
                stray_count += 1
            else:
                pubs[rel_seq] = decoded.pub
        else:
            positions = rel_positions.setdefault(rel_seq, [])
            if rel_seq not in pubs or len(positions) == 2:
                stray_count += 1
            else:
                positions.append(pos)
        pos += decoded.size
    entries: dict[int, SegmentEntry] = {}
    for rel_seq, pub in pubs.items():
        positions = rel_positions.get(rel_seq, [])
        entries[rel_seq] = SegmentEntry(pub, positions[0] if positions else None, len(positions) == 2)
    return SegmentParse(entries, pos, decoded.status, stray_count)
