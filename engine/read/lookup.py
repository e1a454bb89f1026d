"""Read paths: pull by queue offset with a tag filter, and queries by key, unique key and id.

Status values and next-offset rules are RocketMQ's (``DefaultMessageStore.getMessage``). Unlike
RocketMQ's broker, which leaves hash collisions to the client, every lookup here re-checks the tag,
topic and key against the record itself.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from mqstore.engine import _native
from mqstore.engine.consumequeue.consume_queue import QueueView
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE
from mqstore.engine.java.jhash import tags_code
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import MappedFile
from mqstore.engine.log.msgid import decode_offset_msg_id
from mqstore.engine.log.record import (
    MAGIC_V1,
    PROP_KEYS,
    PROP_UNIQ_KEY,
    ByteSource,
    Record,
    decode_record,
)

MAX_FILTER_SCAN_BYTES = 16000
SUBSCRIBE_ALL = "*"
PULL_DECODES = 1  # pull_records' checks: each record decodes
PULL_TAGS = 2  # and its TAGS is one of the filter's tags
_MAGIC_V1 = MAGIC_V1.to_bytes(4, "big", signed=True)
_NO_TAGS = array("q")
_LOG_END = 2**63 - 1
TAKEN_COLUMNS = 5  # a taken record's row for the key query kernels: key, phys offset, file, position, size
PROPERTY_SEPARATOR = b"\x02"
KEYS_PREFIX = PROPERTY_SEPARATOR + PROP_KEYS.encode() + b"\x01"
UNIQ_KEY_PREFIX = PROPERTY_SEPARATOR + PROP_UNIQ_KEY.encode() + b"\x01"


class GetStatus(enum.StrEnum):
    """A get's outcome, RocketMQ's names; a ``str``, so ``status == "FOUND"`` holds as well."""

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

    def split(self, counts: Sequence[int]) -> list[StoredRecords]:
        """Cut into runs of ``counts[i]`` records, in order (``query_keys``' answer, one a key)."""
        out: list[StoredRecords] = []
        first = pos = 0
        for count in counts:
            last = first + count
            size = sum(self.sizes[first:last])
            out.append(StoredRecords(self.data[pos:pos + size], self.queue_offsets[first:last],
                                     self.phys_offsets[first:last], self.sizes[first:last]))
            first, pos = last, pos + size
        return out

    def records(self) -> list[Record]:
        """Each record decoded."""
        records: list[Record] = []
        pos = 0
        for size in self.sizes:
            record = decode_record(self.data, pos, check_crc=False).record
            if record is not None:
                records.append(record)
            pos += size
        return records


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

    def text(self) -> tuple[bytes, array[int]]:
        """The tags as one UTF-8 text and where each ends in it, as ``pull_records`` compares them with
        the records' TAGS; a tag no UTF-8 holds (a lone surrogate) is left out, as no record's TAGS
        decodes to it."""
        held: list[bytes] = []
        for tag in self.tags:
            try:
                held.append(tag.encode())
            except UnicodeEncodeError:
                continue
        return b"".join(held), array("q", accumulate(map(len, held)))


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
    of the result), each checked only for the size its entry names and its magic; with a tag filter,
    also that it decodes and that its TAGS really is one of the filter's (two tags may share a hash
    code). Without ``stored`` each record must decode, and comes decoded. One kernel call
    (``mqstore.engine._native.pull_records``) for the entries whose records lie in each commitlog file."""
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
    code_array = np.fromiter(codes, np.int64, len(codes))
    tags, tag_ends = tag_filter.text() if codes else (b"", _NO_TAGS)
    checks = (PULL_TAGS if codes else 0) | (0 if stored else PULL_DECODES)
    max_count = min(limits.max_count, limits.transfer_count)
    max_bytes = min(limits.max_bytes, limits.transfer_bytes)
    chunks: list[bytes] = []
    queue_offsets: list[int] = []
    phys_offsets: list[int] = []
    sizes: list[int] = []
    count = total_bytes = filtered = unreadable = row = 0
    data: ByteSource = b""
    file_base = file_end = written_pos = 0  # no file yet: the first call stops at the first entry it keeps
    while True:  # one kernel call a commitlog file the kept records lie in
        chunk, more_queue_offsets, more_phys_offsets, more_sizes, (more_filtered, more_unreadable, row, other_phys) = \
            _native.pull_records(entries, code_array, readable_end, max_count, max_bytes, count, total_bytes, row,
                                 queue_offset, data, file_base, file_end, written_pos, checks, tags, tag_ends)
        filtered += more_filtered
        unreadable += more_unreadable
        if more_sizes:
            chunks.append(chunk)
            queue_offsets += more_queue_offsets
            phys_offsets += more_phys_offsets
            sizes += more_sizes
            count += len(more_sizes)
            total_bytes += len(chunk)
        if other_phys is None:
            break
        data, file_base, file_end, written_pos = _file_at(commitlog, other_phys)
    # a record gone (retention, a truncated log) before anything was taken: RocketMQ's MESSAGE_WAS_REMOVING
    status = (GetStatus.FOUND if count else GetStatus.MESSAGE_WAS_REMOVING if unreadable
              else GetStatus.NO_MATCHED_MESSAGE)
    records = StoredRecords(b"".join(chunks), queue_offsets, phys_offsets, sizes)  # one chunk: joined, not copied
    if not stored:
        return GetResult(status, queue_offset + row, min_qo, max_qo, records.records(), filtered)
    return GetResult(status, queue_offset + row, min_qo, max_qo, [], filtered, records)


def _file_at(commitlog: CommitLog, phys_offset: int) -> tuple[ByteSource, int, int, int]:
    """The commitlog file holding ``phys_offset`` as ``pull_records`` takes it: its bytes, the log's
    offsets it spans and its written position; where no file holds it, the gap up to the next file,
    with nothing written in it."""
    mf = commitlog.file_for(phys_offset)
    if mf is not None:
        return mf.buffer, mf.file_base, mf.file_end, mf.written_pos
    later = [f.file_base for f in commitlog.queue.files if f.file_base > phys_offset]
    return b"", phys_offset, min(later, default=_LOG_END), 0


def query_by_key(index: IndexService, commitlog: CommitLog, topic: str, key: str, max_count: int,
                 begin_ms: int, end_ms: int, *, uniq: bool = False, readable_end: int | None = None) -> list[Record]:
    """The newest ``max_count`` records of ``topic`` whose KEYS (or, with ``uniq``, UNIQ_KEY) hold
    ``key``, oldest first, none reaching past ``readable_end``: ``query_by_keys`` for one key, decoded."""
    return query_by_keys(index, commitlog, topic, [key], max_count, begin_ms, end_ms, uniq=uniq,
                         readable_end=readable_end)[0].records()


def query_by_keys(index: IndexService, commitlog: CommitLog, topic: str, keys: Sequence[str], max_count: int,
                  begin_ms: int, end_ms: int, *, uniq: bool = False,
                  readable_end: int | None = None) -> list[StoredRecords]:
    """``query_keys``, one StoredRecords a key."""
    records, counts = query_keys(index, commitlog, topic, keys, max_count, begin_ms, end_ms, uniq=uniq,
                                 readable_end=readable_end)
    return records.split(counts)


def query_keys(index: IndexService, commitlog: CommitLog, topic: str, keys: Sequence[str], max_count: int,
               begin_ms: int, end_ms: int, *, uniq: bool = False,
               readable_end: int | None = None) -> tuple[StoredRecords, list[int]]:
    """For each key, in order, the newest ``max_count`` records of ``topic`` whose KEYS (or, with
    ``uniq``, UNIQ_KEY) hold it, oldest first, as stored, none reaching past ``readable_end``.

    All the keys go together, through a fixed number of kernel calls a round: the index gives each
    key's candidates, newest first (``IndexService.probe``: every key hashed at once, one call an
    index file), hash collisions and records not readable yet among them; each candidate's topic and
    key are compared in its stored bytes (``mqstore.engine._native.keys_holding``, one call for all of them),
    a key taking a record once, up to ``max_count``. A key still short asks for more in another round,
    which goes on where its walk stopped, until it has ``max_count`` or its chains are walked: colliding
    keys take places in a round, never in the answer. The taken records are copied out one key after
    another (``mqstore.engine._native.key_records``), with how many each key has."""
    end = commitlog.max_offset if readable_end is None else readable_end
    files: list[MappedFile] = []  # the commitlog's files from the one holding the lowest candidate on
    buffers: list[ByteSource] = []
    file_bases, limits = array("q"), array("q")
    encoded = [key.encode() for key in keys]
    key_ends = array("q", accumulate(map(len, encoded)))
    key_bytes = b"".join(encoded)
    prefix = UNIQ_KEY_PREFIX if uniq else KEYS_PREFIX
    low = commitlog.min_offset
    probe = index.probe(topic, keys, begin_ms, end_ms)
    page = max(min(max_count, index.max_msgs_num_batch), 0)
    # int64 columns as array's: for the few keys of most queries far cheaper than numpy's set-up
    taken_counts = array("q", bytes(8 * len(keys)))
    taken_min = array("q", [_LOG_END]) * len(keys)
    taken = array("q")
    n_taken = 0
    wants = array("q", [page]) * len(keys)
    topic_bytes = topic.encode()
    while True:
        cand_keys, cand_phys, count = probe.candidates(wants)
        lowest = min(cand_phys[:count], default=_LOG_END)
        if lowest < (files[0].file_base if files else _LOG_END):
            # a walk goes down the log: the files a query reads are mostly the last few, not every one
            wider = _files_from(commitlog, lowest)
            for row in range(n_taken):  # the same last files, more before them
                taken[TAKEN_COLUMNS * row + 2] += len(wider) - len(files)
            files, buffers = wider, [mf.buffer for mf in wider]
            file_bases = array("q", [mf.file_base for mf in files])
            limits = array("q", [min(end - mf.file_base, mf.written_pos) for mf in files])
        if TAKEN_COLUMNS * (n_taken + count) > len(taken):
            taken.extend(array("q", bytes(8 * TAKEN_COLUMNS * count)))
        n_taken, short = _native.keys_holding(buffers, file_bases, limits, low, cand_keys, cand_phys, count,
                                              topic_bytes, prefix, key_bytes, key_ends, uniq, max_count, taken_counts,
                                              taken_min, taken, n_taken, probe.places, probe.file_count, page, wants)
        if not short:
            break
    data, queue_offsets, phys_offsets, sizes, counts = _native.key_records(buffers, taken, n_taken, len(keys))
    return StoredRecords(data, queue_offsets, phys_offsets, sizes), counts


def _files_from(commitlog: CommitLog, phys_offset: int) -> list[MappedFile]:
    """The commitlog's files from the one holding ``phys_offset`` (all of them below the first) to the last."""
    files = commitlog.queue.files
    if not files:
        return []
    size = commitlog.file_size
    at = min(max(phys_offset // size - files[0].file_base // size, 0), len(files) - 1)
    while at > 0 and files[at].file_base > phys_offset:
        at -= 1
    while at + 1 < len(files) and files[at + 1].file_base <= phys_offset:
        at += 1
    return files[at:]


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
