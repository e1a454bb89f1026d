"""Store recovery, as a function that returns what it did.

Clean last stop (no ``abort`` file): check the last three commitlog files. Otherwise check from the
newest file whose first record is older than what the checkpoint says was flushed everywhere.
Either way: scan records with their CRCs up to the first bad one, cut the commitlog there, cut
consume-queue and index entries pointing at or past the cut, then dispatch again every record the
derived files lack.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.checkpoint import Checkpoint
from engine.commitlog import CommitLog
from engine.consume_queue_store import ConsumeQueueStore
from engine.dispatch import DispatchRequest
from engine.index_service import IndexService
from engine.record import DecodeKind

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


def recover(commitlog: CommitLog, queues: ConsumeQueueStore, index: IndexService | None,
            checkpoint: Checkpoint, *, abnormal: bool, check_crc: bool = True,
            require_prop_crc: bool = False) -> RecoveryResult:
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

    end, stop_reason = scan_from, ""
    for phys, decoded in commitlog.scan(scan_from, check_crc=check_crc, read_body=False,
                                        require_prop_crc=require_prop_crc):
        if decoded.kind is DecodeKind.RECORD:
            end = phys + decoded.size
        elif decoded.kind is DecodeKind.BLANK:
            end = commitlog.queue.roll_next(phys)
        else:
            stop_reason = f"{decoded.kind.value} record at {phys}: {decoded.reason}"
    torn_bytes = _written_bytes_after(commitlog, end)
    commitlog.queue.truncate_after(end)
    commitlog.queue.flushed_where = end
    if not torn_bytes:
        stop_reason = ""  # only zeros after the last record: the ordinary end of a log

    queues.truncate_dirty(end)
    cq_from = max(queues.max_phys_end(), commitlog.min_offset)
    if abnormal:
        cq_from = min(cq_from, scan_from)
    index_from = index.truncate_after(end) if index is not None else end
    cq_count, index_count = redispatch(commitlog, queues, index, cq_from, index_from, end)
    queues.correct_min_offsets(commitlog.min_offset)
    return RecoveryResult(abnormal, scan_from, end, torn_bytes, stop_reason, cq_count, index_count)


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
               index_from: int, end: int) -> tuple[int, int]:
    """Dispatch the records in ``[cq_from, end)`` to the consume queues and in ``[index_from, end)``
    to the index. Both dedup what they already hold, so running it twice over a range is harmless.
    Returns how many records went to each."""
    cq_count = index_count = 0
    for phys, decoded in commitlog.scan(min(cq_from, index_from), end, check_crc=False, read_body=False):
        record = decoded.record
        if record is None:
            continue
        request = DispatchRequest.from_record(record)
        if phys >= cq_from:
            queues.dispatch(request)
            cq_count += 1
        if index is not None and phys >= index_from:
            index.build(request.topic, request.keys, request.uniq_key, phys, request.store_ms, request.sys_flag)
            index_count += 1
    return cq_count, index_count
