"""Read paths: pull by queue offset with a tag filter, and queries by key, unique key and id.

Status values and next-offset rules are RocketMQ's (``DefaultMessageStore.getMessage``). Unlike
RocketMQ's broker, which leaves hash collisions to the client, every lookup here re-checks the tag,
topic and key against the record itself.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from engine.commitlog import CommitLog
from engine.consume_queue import CQ_ENTRY_SIZE, CqEntries, QueueView
from engine.index_service import IndexService
from engine.jhash import tags_code
from engine.msgid import decode_offset_msg_id
from engine.record import MAGIC_V1, MAGIC_V2, Record, decode_record

MAX_FILTER_SCAN_BYTES = 16000
MAX_QUERY_CANDIDATES = 1 << 16  # the index caps a query lower still (max_msgs_num_batch)
SUBSCRIBE_ALL = "*"
_MAGICS = frozenset(m.to_bytes(4, "big", signed=True) for m in (MAGIC_V1, MAGIC_V2))


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_RESET = "OFFSET_RESET"


@dataclass(frozen=True, slots=True)
class StoredRecords:
    """Records as stored, back to back in ``data``, with their columns: what a pull answers with
    when nobody on this side needs the records decoded."""

    data: bytes
    queue_offsets: list[int]
    phys_offsets: list[int]
    sizes: list[int]

    def __len__(self) -> int:
        return len(self.sizes)


@dataclass(frozen=True, slots=True)
class GetResult:
    status: GetStatus
    next_queue_offset: int
    min_queue_offset: int
    max_queue_offset: int
    messages: list[Record] = field(default_factory=list)
    filtered_count: int = 0
    stored: StoredRecords | None = None  # instead of ``messages``, when asked for stored bytes

    @property
    def message_count(self) -> int:
        return len(self.stored) if self.stored is not None else len(self.messages)

    @property
    def total_bytes(self) -> int:
        if self.stored is not None:
            return len(self.stored.data)
        return sum(m.size for m in self.messages)


@dataclass(frozen=True, slots=True)
class TagFilter:
    """A subscription expression: ``*`` (or empty) for everything, else ``TagA || TagB``."""

    tags: frozenset[str]

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        if expression is None or expression.strip() in ("", SUBSCRIBE_ALL):
            return cls(frozenset())
        return cls(frozenset(t.strip() for t in expression.split("||") if t.strip()))

    @property
    def codes(self) -> frozenset[int]:
        return frozenset(tags_code(t) for t in self.tags)

    def matches(self, tags: str | None) -> bool:
        return not self.tags or tags in self.tags


@dataclass(frozen=True, slots=True)
class PullLimits:
    max_count: int = 32
    max_bytes: int = 256 * 1024
    transfer_count: int = 32
    transfer_bytes: int = 256 * 1024


def get_messages(cq: QueueView | None, commitlog: CommitLog, queue_offset: int, limits: PullLimits,
                 tag_filter: TagFilter, readable_end: int, *, stored: bool = False) -> GetResult:
    """RocketMQ's getMessage over one queue, never reading records at or past ``readable_end``.

    With ``stored`` the records are not decoded: their bytes are copied out as stored (``stored``
    of the result), each checked only for the size its entry names; a record is decoded only when a
    tag filter must rule out a hash collision."""
    if cq is None:
        return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    min_qo, max_qo = cq.min_queue_offset, cq.max_queue_offset
    if max_qo == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_qo, max_qo)
    if queue_offset < min_qo:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, min_qo, min_qo, max_qo)
    if queue_offset == max_qo:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, queue_offset, min_qo, max_qo)
    if queue_offset > max_qo:
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_qo, min_qo, max_qo)

    scan_count = max(MAX_FILTER_SCAN_BYTES, limits.max_count * CQ_ENTRY_SIZE) // CQ_ENTRY_SIZE
    entries = cq.read(queue_offset, scan_count)
    if len(entries) == 0:
        next_file = queue_offset + cq.entries_per_file - queue_offset % cq.entries_per_file
        return GetResult(GetStatus.OFFSET_FOUND_NULL, next_file, min_qo, max_qo)
    codes = tag_filter.codes
    max_count = min(limits.max_count, limits.transfer_count)
    max_bytes = min(limits.max_bytes, limits.transfer_bytes)
    status = GetStatus.NO_MATCHED_MESSAGE
    messages: list[Record] = []
    chunks: list[bytes] = []
    queue_offsets: list[int] = []
    phys_offsets: list[int] = []
    sizes: list[int] = []
    count = total_bytes = filtered = 0
    next_qo = queue_offset
    for i, (phys_offset, size, code) in enumerate(_rows(entries, max_count + 1)):
        if phys_offset + size > readable_end:
            break
        if count and (count + 1 > max_count or total_bytes + size > max_bytes):
            break
        next_qo = queue_offset + i + 1
        if codes and code not in codes:
            filtered += 1
            continue
        chunk: bytes | None = None
        if stored:
            chunk = _stored_record(commitlog, phys_offset, size)
            record = decode_record(chunk, check_crc=False, read_body=False).record if chunk and codes else None
            readable = chunk is not None and (record is not None or not codes)
        else:
            record = commitlog.read_record(phys_offset, check_crc=False).record
            readable = record is not None and record.size == size
        if not readable:
            if not count:
                status = GetStatus.MESSAGE_WAS_REMOVING
            continue
        if record is not None and not tag_filter.matches(record.tags):  # a hash collision between two tags
            filtered += 1
            continue
        if chunk is not None:
            chunks.append(chunk)
            queue_offsets.append(next_qo - 1)
            phys_offsets.append(phys_offset)
            sizes.append(size)
        elif record is not None:
            messages.append(record)
        count += 1
        total_bytes += size
        status = GetStatus.FOUND
    records = StoredRecords(b"".join(chunks), queue_offsets, phys_offsets, sizes) if stored else None
    return GetResult(status, next_qo, min_qo, max_qo, messages, filtered, records)


def _rows(entries: CqEntries, first: int) -> Iterator[tuple[int, int, int]]:
    """The entries as Python ints, a growing chunk at a time: a scan reads up to 800 entries for
    the tag filter's sake, and a pull without one stops after ``max_count``."""
    start, step = 0, first
    while start < len(entries):
        yield from entries[start:start + step].tolist()
        start += step
        step *= 4


def _stored_record(commitlog: CommitLog, phys_offset: int, size: int) -> bytes | None:
    """The ``size`` bytes at ``phys_offset`` when they hold a record of that size, else None."""
    chunk = commitlog.read_bytes(phys_offset, size)
    if chunk is None or size < 8 or int.from_bytes(chunk[:4], "big") != size or chunk[4:8] not in _MAGICS:
        return None
    return chunk


def query_by_key(index: IndexService, commitlog: CommitLog, topic: str, key: str, max_count: int,
                 begin_ms: int, end_ms: int, *, uniq: bool = False, readable_end: int | None = None,
                 read_body: bool = True) -> list[Record]:
    """The newest ``max_count`` records of ``topic`` whose KEYS (or, with ``uniq``, UNIQ_KEY) hold
    ``key``, oldest first, none reaching past ``readable_end``.

    The index answers with candidates, hash collisions and records not readable yet among them; when
    those take places, it is asked again for more (up to its batch limit), so a collision never hides
    a message that matches."""
    end = commitlog.max_offset if readable_end is None else readable_end
    limit = max_count
    while True:
        candidates = index.query(topic, key, limit, begin_ms, end_ms).phys_offsets
        records = _matching(commitlog, dict.fromkeys(candidates), topic, key, uniq, end, read_body)
        if len(records) >= max_count or len(candidates) < limit or limit >= MAX_QUERY_CANDIDATES:
            return sorted(records[:max_count], key=lambda r: r.phys_offset)
        limit = min(limit * 4, MAX_QUERY_CANDIDATES)


def query_by_keys(index: IndexService, commitlog: CommitLog, topic: str, keys: Sequence[str], max_count: int,
                  begin_ms: int, end_ms: int, *, readable_end: int | None = None,
                  read_body: bool = True) -> list[list[Record]]:
    """``query_by_key`` for many keys of one topic, in their order: the index probed for all the keys
    together, the candidates' records read one by one. A key whose candidates were all taken (by
    collisions, or records not readable yet) while the index may hold more is asked again on its
    own, as ``query_by_key`` would. ``read_body=False``: records without their bodies (the caller
    copies the stored bytes itself)."""
    end = commitlog.max_offset if readable_end is None else readable_end
    answers: list[list[Record]] = []
    for key, candidates in zip(keys, index.query_many(topic, keys, max_count, begin_ms, end_ms), strict=True):
        records = _matching(commitlog, dict.fromkeys(candidates), topic, key, False, end, read_body)
        if len(records) < max_count and len(candidates) >= max_count:
            records = query_by_key(index, commitlog, topic, key, max_count, begin_ms, end_ms, readable_end=end,
                                   read_body=read_body)
        answers.append(sorted(records[:max_count], key=lambda r: r.phys_offset))
    return answers


def _matching(commitlog: CommitLog, phys_offsets: Iterable[int], topic: str, key: str, uniq: bool,
              end: int, read_body: bool = True) -> list[Record]:
    """The records at ``phys_offsets`` (in their order) that really are ``topic``'s and hold ``key``."""
    records: list[Record] = []
    for phys_offset in phys_offsets:
        if not commitlog.min_offset <= phys_offset < end:
            continue
        record = commitlog.read_record(phys_offset, check_crc=False, read_body=read_body).record
        if record is None or record.topic != topic or phys_offset + record.size > end:
            continue
        if (record.uniq_key == key) if uniq else (key in record.keys):
            records.append(record)
    return records


def view_by_id(commitlog: CommitLog, msg_id: str, readable_end: int | None = None) -> Record | None:
    """The record an offsetMsgId points at: None when it is not in the log (below its min, past
    ``readable_end``) or points into the middle of a record."""
    end = commitlog.max_offset if readable_end is None else readable_end
    _, phys_offset = decode_offset_msg_id(msg_id)
    if not commitlog.min_offset <= phys_offset < end:
        return None
    record = commitlog.read_record(phys_offset, check_crc=False).record
    if record is None or record.phys_offset != phys_offset or phys_offset + record.size > end:
        return None
    return record
