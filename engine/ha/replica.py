"""What a slave does to its commitlog: the master's bytes appended as they are, the end builders may
read up to, and a cut back to where the master's log and its own agree.

A slave's commitlog is a byte copy of its master's: the same files, the same offsets. Its one writer
appends each transfer's body at the log's end (``append_replica``); a body never crosses a file
boundary, because the master reads one file at a time. A body may end inside a record, so what
builders may read is ``complete_end``: the end of the last whole record, a blank end-of-file record
counting as whole once its file is.

``truncate_replica`` is crash-safe where RocketMQ's slave truncation (resetting in-memory positions
only) is not: the bytes from the cut to its file's end become zeros on disk and are synced before
any later file is deleted, so no stale record past the cut is ever read back as valid; the later
files go newest first, each unlink synced, so a power cut leaves adjacent files.

On start the supervisor's recovery has already cut any torn tail (``mqstore.engine.repair.recovery``)
and, as every file is opened at full length, the slave's writer finds its end the way the master's
writer does: a scan of whole records from a record boundary, the tail past it cut
(``recover_replica``).
"""

from __future__ import annotations

import numpy as np

from mqstore.engine.batch.column_scan import CHUNK_RECORDS, walk
from mqstore.engine.batch.record_columns import CHECK_CRC, CHECK_TOPIC, REQUIRE_PROP_CRC
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import DecodeKind, decode_record
from mqstore.engine.meta.metafile import fsync_dir

SMALLEST_RECORD = 91  # a version-1 record with IPv4 hosts and every variable field empty


class ReplicaError(MqstoreError, ValueError):
    """Bytes from the master that cannot go where they say they go."""


class ReplicaGapError(ReplicaError):
    """A transfer that does not start at the slave's log end (a gap, or bytes it already has)."""


class ReplicaBoundaryError(ReplicaError):
    """A transfer that would cross a commitlog file boundary (a master never sends one)."""


def append_replica(commitlog: CommitLog, phys_offset: int, data: bytes | bytearray | memoryview) -> int:
    """Append the master's ``data``, which starts at ``phys_offset``; returns the log's new end.

    ``phys_offset`` must be the log's end; on an empty log, the first byte of a file (a master's log
    starts at a file boundary, and a file's first byte is where every scan of it starts), which
    names the first file. Not synced: the flusher flushes the commitlog as on a master."""
    queue = commitlog.queue
    file_size = commitlog.file_size
    if queue.files:
        if phys_offset != commitlog.max_offset:
            raise ReplicaGapError(f"transfer at {phys_offset}, the log ends at {commitlog.max_offset}")
    elif phys_offset < 0 or phys_offset % file_size:
        raise ReplicaGapError(f"an empty log starts at a file boundary, not at {phys_offset}")
    if not data:
        return commitlog.max_offset
    if phys_offset % file_size + len(data) > file_size:
        raise ReplicaBoundaryError(f"{len(data)} bytes at {phys_offset} cross the file boundary at "
                                   f"{queue.roll_next(phys_offset)}")
    mf = queue.last_file_for_append(phys_offset)
    mf.append(data)
    return mf.file_base + mf.written_pos


def complete_end(commitlog: CommitLog, start: int, end: int, *, check_crc: bool = False,
                 require_prop_crc: bool = False) -> int:
    """The end of the last whole record in ``[start, end)`` (``start`` a record boundary): where
    builders may read up to. A blank end-of-file record moves it to the next file's start once its
    file is whole. ``start`` when no record is whole. ``check_crc`` also stops at a record whose
    CRC fails (recovery); bytes straight from the master need only their sizes.

    The chain of sizes is walked by the scan kernel over each file's bytes below ``end`` (a record
    that passes ``end`` is not whole there), thousands of records a call; where the kernel stops,
    ``decode_record`` gives the verdict, as ``CommitLog.scan`` would."""
    end = min(end, commitlog.max_offset)
    checks = CHECK_TOPIC | (CHECK_CRC | (REQUIRE_PROP_CRC if require_prop_crc else 0) if check_crc else 0)
    done = start
    while done < end:
        mf = commitlog.file_for(done)
        if mf is None:
            break
        with memoryview(mf.buffer) as whole, whole[:min(end, mf.file_end) - mf.file_base] as below:
            pos, blank = _whole_records(below, done - mf.file_base, checks, check_crc, require_prop_crc)
        done = mf.file_base + pos
        if blank or done == mf.file_end:  # a blank (or the last record) closes the file
            if mf.file_end > end:
                break
            done = mf.file_end
        else:
            break
    return done


def _whole_records(mv: memoryview, pos: int, checks: int, check_crc: bool, require_prop_crc: bool
                   ) -> tuple[int, bool]:
    """Where the whole records from ``pos`` in ``mv`` end, and whether a blank record is there."""
    buf = np.frombuffer(mv, dtype=np.uint8)
    try:
        while True:
            rows = min(CHUNK_RECORDS, (len(mv) - pos) // SMALLEST_RECORD + 1)  # columns sized to the bytes
            _, pos, why, _ = walk(buf, pos, len(mv), rows, checks)
            if why == "full":
                continue
            if why == "end":
                return pos, False
            decoded = decode_record(mv, pos, check_crc=check_crc, read_body=False, require_prop_crc=require_prop_crc)
            if decoded.kind is DecodeKind.RECORD and pos + decoded.size <= len(mv):
                pos += decoded.size  # the kernel's checks were stricter than the decoder: take it
                continue
            return pos, decoded.kind is DecodeKind.BLANK
    finally:
        del buf  # no view may outlive the walk: the caller releases the map's view after it


def truncate_replica(commitlog: CommitLog, phys_offset: int) -> None:
    """Cut the log at ``phys_offset``, durably: its file zeroed from there and synced, every later
    file deleted (newest first, each unlink synced). ReplicaError beyond the log's end."""
    queue = commitlog.queue
    if phys_offset < 0 or phys_offset > commitlog.max_offset:
        raise ReplicaError(f"cannot cut at {phys_offset}: the log holds [0, {commitlog.max_offset})")
    holder = queue.find(phys_offset)
    if holder is not None:
        # zeroed on disk before any unlink: a power cut part way leaves zeros at the cut, where every
        # scan stops, never a stale record after it
        holder.truncate_after(phys_offset - holder.file_base)
    for mf in reversed([mf for mf in queue.files if mf is not holder and mf.file_end > phys_offset]):
        mf.delete()
        queue.files.remove(mf)
        fsync_dir(queue.directory)
    queue.flushed_where = min(queue.flushed_where, phys_offset)


def recover_replica(commitlog: CommitLog, from_phys: int | None = None, *, require_prop_crc: bool = False) -> int:
    """The log's end on start, for a slave's writer: whole records scanned, with their CRCs, from
    ``from_phys`` (a record boundary; by default the last file's first byte, which always is one),
    and the tail past the last one cut (``truncate_replica``). Returns the end."""
    if not commitlog.queue.files:
        return 0
    start = commitlog.queue.files[-1].file_base if from_phys is None else from_phys
    end = complete_end(commitlog, start, commitlog.max_offset, check_crc=True, require_prop_crc=require_prop_crc)
    truncate_replica(commitlog, end)
    return end
