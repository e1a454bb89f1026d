"""A queue index cut back to its queue's recovered end, before anything is sent again.

Under ASYNC_FLUSH a reader indexes what the consume-queue builder published, which includes records
the flush service has not synced yet, and the index's own flushes make that progress durable (segment
files, ``next_seq_id`` in queue_index.json, the journal they fsync). A power cut can then keep an index
that names messages the commitlog lost. After recovery the consume queue is shorter and new sends take
the lost queue offsets again; an index whose ``next_seq_id`` is past the recovered end (its owner
indexes from there) never publishes them, and the group skips them for good. Worse, a lost message's
entry whose commitlog offset a new record now fills, at the same queue offset and with the same size,
would give the new message the old one's delivery and ack.

So recovery, before the writer takes traffic, cuts every index back to its queue's recovered end
(``truncate_to_queue_ends``): each publish, delivery and ack at a seq_id at or past it goes, from the
segment files (rewritten atomically, their other records kept in order) and from the journal alike,
and ``next_seq_id`` comes back to the end, so that the owner indexes the new sends at those offsets.
Nothing else can: once new sends fill the lost offsets, no file tells their entries from the lost
messages' any more. The files keep RabbitMQ's format; the owner's next open recovers them as after
any crash (dirty, the journal checked against the commitlog, ``mqstore.engine.ackindex.files``).

The order survives a power cut of its own: the clean marker goes first (the next open is dirty),
segment files a flush was appending to are cut back to their size before it, then the segments and
the journal are rewritten, and queue_index.json comes last; a cut that did not finish leaves the
index past the end, and the next recovery cuts it again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.ackindex.codec import DecodeStatus, decode_journal_record, decode_segment_record
from mqstore.engine.ackindex.files import (
    JOURNAL_FILE_NAME,
    cut_interrupted_appends,
    read_marker,
    read_meta,
    segment_numbers_on_disk,
    segment_path,
    take_marker,
    write_meta,
)
from mqstore.engine.ackindex.low_water import QUEUE_INDEX_DIR, AckKey, queue_index_keys
from mqstore.engine.meta.metafile import fsync_dir, write_atomic


@dataclass(frozen=True, slots=True)
class Truncation:
    """An index cut back: it held seq_ids up to ``indexed_end`` (exclusive), its queue ends at
    ``end_seq_id``."""

    indexed_end: int
    end_seq_id: int
    segments_changed: int  # segment files rewritten or deleted
    journal_records_dropped: int


def truncate_to_queue_ends(store_dir: Path, queue_ends: Mapping[tuple[str, int], int]
                           ) -> list[tuple[AckKey, Truncation]]:
    """Recovery's part: every ack-mode group's index cut back to its queue's recovered end
    (``queue_ends``: topic, queue id -> next queue offset; a queue absent has none, as the writer
    starts it at 0). Returns the indexes that were past it."""
    out: list[tuple[AckKey, Truncation]] = []
    for key in queue_index_keys(store_dir):
        group, topic, queue_id = key
        directory = store_dir / QUEUE_INDEX_DIR / group / topic / str(queue_id)
        cut = truncate_after(directory, queue_ends.get((topic, queue_id), 0))
        if cut is not None:
            out.append((key, cut))
    return out


def truncate_after(directory: Path, end_seq_id: int) -> Truncation | None:
    """Drop every record of the (closed) index in ``directory`` at a seq_id of ``end_seq_id`` or more
    and bring its ``next_seq_id`` back to ``end_seq_id``; None (nothing written) when it holds none."""
    found = read_meta(directory)
    if found is None:
        return None
    entries_per_segment, meta = found
    journal_path = directory / JOURNAL_FILE_NAME
    try:
        journal = journal_path.read_bytes()
    except FileNotFoundError:
        journal = b""
    kept_journal, journal_end, dropped = _journal_before(journal, end_seq_id)
    on_disk = segment_numbers_on_disk(directory)
    tail = sorted(num for num in on_disk if (num + 1) * entries_per_segment > end_seq_id)
    marker = read_marker(directory)
    indexed_end = max(meta.next_seq_id, journal_end, marker.next_seq_id if marker is not None else 0)
    # a trusted marker (the next open reads no segment) bounds what the segment files hold
    trusted = marker is not None and not journal and not meta.flushing and \
        {num for num, count in marker.unacked_counts.items() if count > 0} == on_disk
    if not trusted:
        for num in tail:
            indexed_end = max(indexed_end, _segment_end(segment_path(directory, num), num, entries_per_segment,
                                                        meta.flushing.get(num)))
    if indexed_end <= end_seq_id:
        return None
    take_marker(directory)  # first: from here on the next open is dirty
    cut_interrupted_appends(directory, meta.flushing)  # what they tore is in the journal
    changed = sum(_segment_before(segment_path(directory, num), max(end_seq_id - num * entries_per_segment, 0),
                                  entries_per_segment) for num in tail)
    if changed:
        fsync_dir(directory)
    if kept_journal != journal:
        write_atomic(journal_path, kept_journal, keep_backup=False)
    write_meta(directory, entries_per_segment, min(meta.next_seq_id, end_seq_id))  # last
    return Truncation(indexed_end, end_seq_id, changed, dropped)


def _journal_before(journal: bytes, end_seq_id: int) -> tuple[bytes, int, int]:
    """The journal's whole records at seq_ids below ``end_seq_id``, in order (its torn tail goes
    too); one past the highest seq_id any whole record names; how many records were left out."""
    kept: list[bytes] = []
    pos = highest_end = dropped = 0
    while True:
        decoded = decode_journal_record(journal, pos)
        if decoded.record is None:
            return b"".join(kept), highest_end, dropped
        highest_end = max(highest_end, decoded.record.seq_id + 1)
        if decoded.record.seq_id < end_seq_id:
            kept.append(journal[pos:pos + decoded.size])
        else:
            dropped += 1
        pos += decoded.size


def _segment_records(data: bytes, entries_per_segment: int) -> list[tuple[int, int, int]]:
    """(rel_seq, start, end) of each whole record, up to a torn tail."""
    out: list[tuple[int, int, int]] = []
    pos = 0
    while True:
        decoded = decode_segment_record(data, pos, entries_per_segment)
        if decoded.status is not DecodeStatus.RECORD:
            return out
        out.append((decoded.rel_seq, pos, pos + decoded.size))
        pos += decoded.size


def _segment_end(path: Path, num: int, entries_per_segment: int, size_before_flush: int | None) -> int:
    """One past the highest seq_id a record of the segment file names (0: none); a file a flush was
    appending to counts up to its size before that flush (what recovery cuts it back to)."""
    data = path.read_bytes()
    records = _segment_records(data if size_before_flush is None else data[:size_before_flush], entries_per_segment)
    return max((num * entries_per_segment + rel_seq + 1 for rel_seq, _, _ in records), default=0)


def _segment_before(path: Path, end_rel_seq: int, entries_per_segment: int) -> bool:
    """Keep only the segment file's records below ``end_rel_seq``, in order (the file goes when none
    is); whether it changed. The caller syncs the directory."""
    data = path.read_bytes()
    kept = b"".join(data[start:end] for rel_seq, start, end in _segment_records(data, entries_per_segment)
                    if rel_seq < end_rel_seq)
    if kept == data:
        return False
    if kept:
        write_atomic(path, kept, keep_backup=False)
    else:
        os.unlink(path)
    return True
