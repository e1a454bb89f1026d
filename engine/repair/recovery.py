"""Store recovery, as a function that returns what it did.

Clean last stop (no ``abort`` file): check the last three commitlog files. Otherwise check from the
newest file whose first record is older than what the checkpoint says was flushed everywhere.
Either way: scan records with their CRCs up to the first bad one, cut the commitlog there, cut
consume-queue and index entries pointing at or past the cut, then dispatch again every record the
derived files lack. When there are no derived files at all (lost, or deleted for a rebuild) nothing
can point past the cut, so the records are dispatched as the CRC scan passes them: one pass over the
bytes instead of two. After a crash, a queue found short of entries below where re-dispatch starts
(a checkpoint written wrong) moves the start back a commitlog file at a time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import numpy as np

from mqstore.engine.batch.column_scan import ColumnScan, known_starts, scan_columns
from mqstore.engine.batch.dispatch import DispatchRequest
from mqstore.engine.batch.dispatch_columns import DispatchColumns
from mqstore.engine.consumequeue.consume_queue import ConsumeQueue, ConsumeQueueOrderError
from mqstore.engine.consumequeue.entry import FILLER_SIZE
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.delay.table import DEFAULT_DELAY_LEVELS, DelayLevels
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.meta.checkpoint import Checkpoint

NORMAL_RECOVERY_FILES = 3
TORN_TAIL_LOOKAHEAD = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    abnormal: bool
    scan_from: int           # where the CRC scan started
    end_phys_offset: int     # the commitlog's end after recovery
    truncated_bytes: int     # bytes cut from the torn tail (0 on a clean store)
    stop_reason: str         # why the scan stopped ("" at a clean end)
    cq_redispatched: int
    index_redispatched: int
    repairs: tuple[str, ...] = ()  # files a power cut left unopenable, and what was done to each


def recover(commitlog: CommitLog, queues: ConsumeQueueStore, index: IndexService | None,
            checkpoint: Checkpoint, *, abnormal: bool, check_crc: bool = True,
            require_prop_crc: bool = False, levels: DelayLevels = DEFAULT_DELAY_LEVELS,
            cut_queues: Collection[tuple[str, int]] = ()) -> RecoveryResult:
    """``levels``: the store's delay table, which gives a schedule-topic entry its tags code.
    ``cut_queues``: consume queues cut back before the open (``repair_crash_files``): re-dispatch
    starts no later than any of their ends, whatever the checkpoint says was flushed."""
    queues.recover()
    files = commitlog.queue.files
    if not files:
        queues.delete_all()
        if index is not None:
            index.truncate_after(0)
        return RecoveryResult(abnormal, 0, 0, 0, "", 0, 0)
    if abnormal and index is not None:
        index.drop_newer_than(checkpoint.index_msg_ms)
    scan_from = _abnormal_start(commitlog, checkpoint.min_timestamp_index_ms if index is not None
                                else checkpoint.min_timestamp_ms) if abnormal else \
        files[max(0, len(files) - NORMAL_RECOVERY_FILES)].file_base

    scan = scan_columns(commitlog, scan_from, check_crc=check_crc, require_prop_crc=require_prop_crc)
    dispatched = None
    if not abnormal and queues.applied_end() < 0 and (index is None or not index.files):
        # nothing derived (lost, or deleted for a rebuild): no entry can point past the cut, so every
        # record the scan passes is dispatched while its chunk is in cache, instead of by a second pass
        before = redispatch(commitlog, queues, index, commitlog.min_offset, commitlog.min_offset, scan_from,
                            levels=levels)
        cq_count, index_count = dispatch_chunks(scan, queues, index, scan_from, scan_from, commitlog.min_offset,
                                                levels)
        dispatched = before[0] + cq_count, before[1] + index_count
    else:
        scan.drain()
    end, stop_reason = scan.end, ""
    if scan.stop is not None:
        phys, decoded = scan.stop
        stop_reason = f"{decoded.kind.value} record at {phys}: {decoded.reason}"
    torn_bytes = _written_bytes_after(commitlog, end)
    commitlog.queue.truncate_after(end)
    commitlog.queue.flushed_where = end
    if not torn_bytes:
        stop_reason = ""  # only zeros after the last record: the ordinary end of a log

    if dispatched is None:  # derived files hold entries: cut what points past the end, then fill the gaps
        queues.truncate_dirty(end)
        cq_from = max(queues.applied_end(), commitlog.min_offset)
        if abnormal:
            cq_from = min(cq_from, scan_from, cut_torn_queue_entries(commitlog, queues, scan_from, levels),
                          *_cut_queue_ends(commitlog, queues, cut_queues))
        index_from = index.truncate_after(end) if index is not None else end
        dispatched = _redispatch_back_to_fit(commitlog, queues, index, cq_from, index_from, end, known_starts(scan),
                                             levels, abnormal)
    cq_count, index_count = dispatched
    queues.correct_min_offsets(commitlog.min_offset)
    return RecoveryResult(abnormal, scan_from, end, torn_bytes, stop_reason, cq_count, index_count)


def _redispatch_back_to_fit(commitlog: CommitLog, queues: ConsumeQueueStore, index: IndexService | None,
                            cq_from: int, index_from: int, end: int, known: dict[int, np.ndarray[Any, Any]] | None,
                            levels: DelayLevels, abnormal: bool) -> tuple[int, int]:
    """``redispatch``; after a crash, a queue short of entries below ``cq_from`` (a checkpoint that
    says more was synced than was: written wrong, or by an older version) refuses a record whose
    queue offset is past its end. Start again a commitlog file earlier, down to the first: the
    queues skip what they hold, and the store opens with nothing lost."""
    while True:
        try:
            return redispatch(commitlog, queues, index, cq_from, index_from, end, known, levels)
        except ConsumeQueueOrderError:
            earlier = [mf.file_base for mf in commitlog.queue.files if mf.file_base < cq_from]
            if not abnormal or not earlier:
                raise
            cq_from, known = earlier[-1], None


def _cut_queue_ends(commitlog: CommitLog, queues: ConsumeQueueStore,
                    cut_queues: Collection[tuple[str, int]]) -> list[int]:
    ends = []
    for topic, queue_id in cut_queues:
        cq = queues.get(topic, queue_id)
        ends.append(commitlog.min_offset if cq is None else max(cq.max_phys_end, commitlog.min_offset))
    return ends


def cut_torn_queue_entries(commitlog: CommitLog, queues: ConsumeQueueStore, from_phys: int,
                           levels: DelayLevels) -> int:
    """After a crash, consume-queue entries written since the checkpoint may be torn (a power cut
    inside a 20-byte entry leaves a valid-looking offset and size with a garbled rest). Walk each
    queue back from its end, checking entries against their records, down to an agreeing entry that
    points before ``from_phys`` (flushed before the checkpoint), or one whose record retention
    deleted (below the commitlog's min offset, in order with its neighbours); cut the queue at the
    first entry that disagrees. Returns where re-dispatch must start to write the cut entries again."""
    redispatch_from = from_phys
    for cq in queues:
        first_bad = None
        agreed_phys = None  # the phys offset of the last entry (walking down) that agreed with its record
        queue_offset = cq.max_queue_offset - 1
        while queue_offset >= cq.min_queue_offset:
            entry = cq.entry(queue_offset)
            if entry is None:
                break
            phys, size, tags_code = entry
            if 0 <= phys < commitlog.min_offset and _in_order(cq, queue_offset, phys, agreed_phys):
                break  # its record went with retention: expired, not torn
            if cq_entry_problem(commitlog, cq.topic, cq.queue_id, queue_offset, phys, size, tags_code, levels):
                first_bad = queue_offset
            elif phys < from_phys:
                break
            else:
                agreed_phys = phys
            queue_offset -= 1
        if first_bad is not None:
            cq.truncate_from(first_bad)
            redispatch_from = min(redispatch_from, max(cq.max_phys_end, commitlog.min_offset))
    return redispatch_from


def _in_order(cq: ConsumeQueue, queue_offset: int, phys: int, agreed_phys: int | None) -> bool:
    """Whether an entry's phys offset lies between the entry below it and the nearest entry above
    that agreed with its record: a torn entry garbled into a small offset does not."""
    below = cq.entry(queue_offset - 1) if queue_offset > cq.min_queue_offset else None
    return (agreed_phys is None or phys < agreed_phys) and (below is None or below[0] < phys)


def cq_entry_problem(commitlog: CommitLog, topic: str, queue_id: int, queue_offset: int, phys: int, size: int,
                     tags_code: int, levels: DelayLevels) -> str:
    """What is wrong with a consume-queue entry no record claimed ("" when nothing is)."""
    if size == FILLER_SIZE:
        return "filler entry above the queue's min offset"
    if phys < 0 or size <= 0:
        return f"invalid entry (phys offset {phys}, size {size})"
    decoded = commitlog.read_record(phys, check_crc=False, read_body=False)
    record = decoded.record
    if record is None:
        return f"no record at commitlog phys offset {phys} ({decoded.reason or decoded.kind.value})"
    request = DispatchRequest.from_record(record, levels)
    problems = [f"{name} {theirs} in the record, {ours} in the entry" for name, theirs, ours in (
        ("phys offset", record.phys_offset, phys), ("size", record.size, size),
        ("topic", record.topic, topic), ("queue id", record.queue_id, queue_id),
        ("queue offset", record.queue_offset, queue_offset), ("tags code", request.tags_code, tags_code),
    ) if theirs != ours]
    if not problems and not request.has_queue_entry:
        problems.append("the record is a prepared or rolled-back transaction")
    return "; ".join(problems)



def _abnormal_start(commitlog: CommitLog, min_timestamp_ms: int) -> int:
    """The newest file whose first record was stored no later than ``min_timestamp_ms``."""
    for mf in reversed(commitlog.queue.files):
        decoded = commitlog.read_record(mf.file_base, read_body=False)
        record = decoded.record
        if record is not None and record.store_ms != 0 and record.store_ms <= min_timestamp_ms:
            return mf.file_base
    return commitlog.queue.files[0].file_base


def _written_bytes_after(commitlog: CommitLog, end: int) -> int:
    """Non-zero bytes after ``end`` in its file: what a torn tail left behind. Looks one largest
    record ahead, since appends are contiguous and earlier cuts zeroed what they dropped."""
    mf = commitlog.queue.find(end)
    if mf is None:
        return 0
    pos = end - mf.file_base
    tail = mf.read(pos, min(mf.file_size - pos, TORN_TAIL_LOOKAHEAD))
    return len(tail.rstrip(b"\x00"))


def redispatch(commitlog: CommitLog, queues: ConsumeQueueStore, index: IndexService | None, cq_from: int,
               index_from: int, end: int, known: dict[int, np.ndarray[Any, Any]] | None = None,
               levels: DelayLevels = DEFAULT_DELAY_LEVELS, deleted: Mapping[str, int] | None = None
               ) -> tuple[int, int]:
    """Dispatch the records in ``[cq_from, end)`` to the consume queues and in ``[index_from, end)``
    to the index. Both dedup what they already hold, so running it twice over a range is harmless.
    ``known`` holds record starts a scan of the range already found; ``deleted`` the deleted topics
    (``mqstore.engine.meta.topics.deleted_topics``), whose records below each one's offset get no queue
    entry. Returns how many records went to each."""
    scan = scan_columns(commitlog, min(cq_from, index_from), end, check_crc=False, known=known)
    return dispatch_chunks(scan, queues, index, cq_from, index_from, commitlog.min_offset, levels, deleted)


def dispatch_chunks(scan: ColumnScan, queues: ConsumeQueueStore, index: IndexService | None, cq_from: int,
                    index_from: int, expired_below: int, levels: DelayLevels,
                    deleted: Mapping[str, int] | None = None) -> tuple[int, int]:
    """Dispatch every chunk ``scan`` yields: the records at or after ``cq_from`` to the consume queues,
    at or after ``index_from`` to the index. Returns how many records went to each."""
    cq_count = index_count = 0
    with closing(iter(scan)) as chunks:  # a failed dispatch leaves no view of a mapped file behind
        for chunk in chunks:  # a chunk at a time, as columns: batch work for the queues and the index
            try:
                batch = DispatchColumns.of(chunk.buf, chunk.records, levels)
            finally:
                del chunk
            for_queues = batch.since(cq_from)
            rows = _live_rows(for_queues.rows, for_queues.topics, deleted) if deleted else for_queues.rows
            if len(rows):
                queues.dispatch_rows(rows, for_queues.topics, expired_below=expired_below)
                cq_count += len(rows)
            for_index = batch.since(index_from)
            if index is not None and len(for_index):
                index.build_hashed(for_index.rows, for_index.key_rows, for_index.key_hashes)
                index_count += len(for_index)
    return cq_count, index_count


def _live_rows(rows: np.ndarray[Any, Any], topics: list[str], deleted: Mapping[str, int]) -> np.ndarray[Any, Any]:
    """``rows`` without the records of a deleted topic below the offset its deletion recorded."""
    gone = np.zeros(len(rows), dtype=bool)
    for code, topic in enumerate(topics):
        if topic in deleted:
            gone |= (rows["topic"] == code) & (rows["phys_offset"] < deleted[topic])
    return rows[~gone] if gone.any() else rows
