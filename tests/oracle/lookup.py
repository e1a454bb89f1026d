"""The per-entry Python of the read paths that kernels replaced: a pull's loop over consume-queue
entries and the records they point at (``mqstore.engine._native.pull_records``;
``mqstore.engine.read.lookup.get_messages``,
kept here whole), the comparison of a key query's candidates with the key (``matching``, which
``mqstore.engine._native.keys_holding`` replaced) and a key query's rounds of pages, comparisons and answer
(``query_keys``, ``of_keys``: ``mqstore.engine.read.lookup.query_keys`` as it ran before its kernels, whose index
walks went through ``IndexService.query_many``, here the file walk it made then, ``keyindex.select_pages``):
the oracles their property tests hold the kernels to."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence

from mqstore.engine.consumequeue.consume_queue import QueueView
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE, CqEntries
from mqstore.engine.keyindex.keys import index_key
from mqstore.engine.keyindex.pages import IndexCursor, QueryPages
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import MAGIC_V2, QUEUE_OFFSET_POS, Record, decode_record, record_size
from mqstore.engine.read.lookup import (
    _MAGIC_V1,
    KEYS_PREFIX,
    MAX_FILTER_SCAN_BYTES,
    PROPERTY_SEPARATOR,
    UNIQ_KEY_PREFIX,
    GetResult,
    GetStatus,
    PullLimits,
    StoredRecords,
    TagFilter,
)
from tests.oracle import keyindex

_MAGICS = frozenset((_MAGIC_V1, MAGIC_V2.to_bytes(4, "big", signed=True)))
_LONG = struct.Struct(">q")


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


def _stored_record(commitlog: CommitLog, phys_offset: int, size: int) -> bytes | None:
    """The ``size`` bytes at ``phys_offset`` when they hold a record of that size, else None."""
    chunk = commitlog.read_bytes(phys_offset, size)
    if chunk is None or size < 8 or int.from_bytes(chunk[:4], "big") != size or chunk[4:8] not in _MAGICS:
        return None
    return chunk


def _rows(entries: CqEntries, first: int) -> Iterator[tuple[int, int, int]]:
    """The entries as Python ints, a growing chunk at a time: a scan reads up to 800 entries for
    the tag filter's sake, and a pull without one stops after ``max_count``."""
    start, step = 0, first
    while start < len(entries):
        yield from entries[start:start + step].tolist()
        start += step
        step *= 4


def matching(commitlog: CommitLog, phys_offsets: Iterable[int], topic: bytes, key: bytes, uniq: bool,
              end: int) -> list[tuple[int, bytes]]:
    """(phys offset, stored bytes) of the records at ``phys_offsets`` (in their order, each once) that
    really are ``topic``'s and hold ``key``."""
    found: list[tuple[int, bytes]] = []
    for phys_offset in dict.fromkeys(phys_offsets):
        if not commitlog.min_offset <= phys_offset < end:
            continue
        size = commitlog.size_at(phys_offset)
        if size <= 0 or phys_offset + size > end:
            continue
        chunk = _stored_record(commitlog, phys_offset, size)
        try:
            holds = chunk is not None and _holds(chunk, topic, UNIQ_KEY_PREFIX if uniq else KEYS_PREFIX, key, uniq)
        except struct.error:  # a length field pointing past the record: not a record that matches
            holds = False
        if holds and chunk is not None:
            found.append((phys_offset, chunk))
    return found


def _holds(record: bytes, topic: bytes, prefix: bytes, key: bytes, whole: bool) -> bool:
    """Whether the stored ``record`` is one ``decode_record`` takes, ``topic``'s, and its property
    (``prefix``: separator, name, ``\x01``; the last one so named, as ``decode_properties`` keeps it)
    holds ``key``: as the whole value, or as one of its space-separated words."""
    decoded = decode_record(record, check_crc=False)
    if decoded.record is None or decoded.record.topic.encode() != topic:
        return False
    rec = decoded.record
    props_len = rec.size - record_size(rec.sys_flag, len(rec.body), len(topic), 0, rec.version)
    value = None
    for segment in record[rec.size - props_len:].split(PROPERTY_SEPARATOR):  # the bytes, never decoded
        name, _, text = segment.partition(b"\x01")
        if name == prefix[1:-1] and text:
            value = text
    return value is not None and (value == key if whole else key in value.split(b" "))


def query_keys(index: IndexService, commitlog: CommitLog, topic: str, keys: Sequence[str], max_count: int,
               begin_ms: int, end_ms: int, *, uniq: bool = False,
               readable_end: int | None = None) -> tuple[StoredRecords, list[int]]:
    """For each key, in order, the newest ``max_count`` records of ``topic`` whose KEYS (or, with
    ``uniq``, UNIQ_KEY) hold it, oldest first, as stored, none reaching past ``readable_end``.

    The index is probed for all the keys together, a page of candidates each: hash collisions and
    records not readable yet among them. Each candidate's topic and key are compared in its stored
    bytes (nothing decoded). A key still short asks for its next page, which goes on where the last
    one stopped, until it has ``max_count`` or its chains are walked: colliding keys take places in
    a page, never in the answer. The answers come one key after another (``of_keys``), with how many
    records each key has."""
    end = commitlog.max_offset if readable_end is None else readable_end
    topic_bytes = topic.encode()
    found: list[dict[int, bytes]] = [{} for _ in keys]
    after: list[IndexCursor | None] = [None] * len(keys)
    short: Sequence[int] = range(len(keys))
    pages = _query_many(index, topic, keys, [max_count] * len(keys), begin_ms, end_ms, [None] * len(keys))
    while True:
        asked: list[list[int]] = []
        for i, candidates, next_page in zip(short, pages.phys_offsets, pages.next_pages, strict=True):
            # a record seen on an earlier page (a key twice in its KEYS) is not read again
            asked.append([phys_offset for phys_offset in candidates if phys_offset not in found[i]] if found[i]
                         else candidates)
            after[i] = next_page
        held = [matching(commitlog, candidates, topic_bytes, keys[i].encode(), uniq, end)
                for i, candidates in zip(short, asked, strict=True)]
        for i, records in zip(short, held, strict=True):
            found[i].update(records)
        short = [i for i in short if len(found[i]) < max_count and after[i] is not None]
        if not short:
            return of_keys(found)
        pages = _query_many(index, topic, [keys[i] for i in short], [max_count - len(found[i]) for i in short],
                            begin_ms, end_ms, [after[i] for i in short])


def _query_many(index: IndexService, topic: str, keys: Sequence[str], counts: Sequence[int], begin_ms: int,
                end_ms: int, after: Sequence[IndexCursor | None]) -> QueryPages:
    """``IndexService.query_many`` as it ran then."""
    return keyindex.select_pages(index.files[::-1], keyindex.index_hashes([index_key(topic, key) for key in keys]),
                                 [min(count, index.max_msgs_num_batch) for count in counts], after, begin_ms, end_ms)


def of_keys(found: Sequence[dict[int, bytes]]) -> tuple[StoredRecords, list[int]]:
    """From each key's {phys offset: stored bytes}: every key's records, oldest first, one key after
    another, and how many each key has."""
    chunks: list[bytes] = []
    phys_offsets: list[int] = []
    for records in found:
        for phys_offset in sorted(records):
            chunks.append(records[phys_offset])
            phys_offsets.append(phys_offset)
    return (StoredRecords(b"".join(chunks), [_LONG.unpack_from(chunk, QUEUE_OFFSET_POS)[0] for chunk in chunks],
                          phys_offsets, [len(chunk) for chunk in chunks]), [len(records) for records in found])
