"""The files of a queue index directory: names, the small JSON files, segment appends and
deletes, the cache of parsed segment files, and recovery at open as a function returning a value.

    journal.jif       the journal (mqstore.engine.ackindex.codec)
    {segment}.idx     segment files, decimal segment number (mqstore.engine.ackindex.codec)

and two ``write_atomic`` JSON files::

    queue_index.json  {"version": 1, "entries_per_segment": E, "next_seq_id": N,
                       "flushing": [[segment, size_bytes], ...]}
                      E is the geometry, fixed at creation: opening with another E is an error.
                      N is next_seq_id as of the last flush; it keeps the next seq_id when the
                      flush deleted or never wrote every file that showed it.
                      "flushing" (absent when empty) names the segment files a flush is appending
                      to, with the size each had before: written before the appends, cleared after.
    clean.json        the clean-shutdown marker (RabbitMQ's recovery terms, reference §2.1):
                      {"version": 1, "next_seq_id": N, "segments": [[segment, unacked_count], ...]}
                      written by a clean close after its flush, deleted at open before anything
                      else is written, so a crash at any later instant reads as dirty.

Clean recovery (§2.2) trusts the marker when the journal is empty and the segment files on disk
are exactly those it lists: no segment file is read. Dirty recovery (§2.3) replays the journal's
whole records (a torn tail is ignored, §1.3) over every segment file, cuts each file back to its
last whole record (a flush that crashed mid-append; the journal still holds those entries), and
drops from the journal what a crashed flush had already appended (``mqstore.engine.ackindex.slots``).

A power cut between a flush's append and its fsync keeps any part of the append, the rest reading
back as zeros, and the record the loss cuts through can parse whole: a publish naming another
message, or a 2-byte delivery naming another rel_seq (read positionally, an ack of a message never
acked). Nothing in the format tells such a record from a whole one, and the commitlog cannot either
(a message retention deleted fails that check too). So a flush first fsyncs the journal, then
records in queue_index.json how long each file it appends to is ("flushing"), and only then
appends; a dirty recovery cuts every file named there back to that length, and the journal, which
holds every record the append carried, replays them again. A flush that completed clears the list
before the journal is truncated.

The journal is never fsynced and has no checksum (RabbitMQ's format): after a power cut a page lost
between pages that survived reads back as zeros, and the record it cuts through can parse whole, a
publish naming another message or another seq_id. So a dirty recovery given ``check_publish`` (the
owner's look into the message store: does the commitlog hold this seq_id's message where the
publish says?) replays the journal only up to the first publish that fails it: what follows is
taken for a torn page like a torn tail is. Losing those records costs at most redeliveries (acks,
deliveries) and publishes the owner derives again from the consume queue (``next_seq_id`` is not
moved by anything past the cut); taking a torn publish would deliver, or drop as gone, the wrong
message.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.ackindex.codec import (
    JournalKind,
    JournalParse,
    PubRecord,
    SegmentEntry,
    decode_journal_record,
    parse_journal,
    parse_segment,
)
from mqstore.engine.ackindex.slots import JournalSlot, journal_minus_segment, replay_journal
from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.metafile import BACKUP_SUFFIX, TMP_SUFFIX, fsync_dir, read_with_backup, write_atomic

JOURNAL_FILE_NAME = "journal.jif"
SEGMENT_SUFFIX = ".idx"
META_FILE_NAME = "queue_index.json"
CLEAN_FILE_NAME = "clean.json"
FORMAT_VERSION = 1
_SEGMENT_NAME = re.compile(r"^(0|[1-9][0-9]*)\.idx$")
PublishCheck = Callable[[int, PubRecord], bool]  # (seq_id, publish) -> the message store holds it so


class QueueIndexError(MqstoreError):
    """Misuse (a publish below next_seq_id, a closed index), another geometry on disk, or an index
    that refuses writes after a failed one."""


class RecoveryKind(enum.Enum):
    CREATED = "created"  # there was no queue_index.json: a new index
    CLEAN = "clean"  # the clean marker was trusted; no segment file was read
    DIRTY = "dirty"  # the journal was replayed over every segment file


@dataclass(frozen=True, slots=True)
class Recovery:
    kind: RecoveryKind
    reason: str = ""  # why not clean
    journal_record_count: int = 0  # whole journal records replayed
    ignored_journal_bytes: int = 0  # the torn tail after them
    repaired_segment_count: int = 0  # segment files cut back to their last whole record
    interrupted_appends: int = 0  # segment files cut back to their length before an interrupted flush
    rejected_publish: bool = False  # replay stopped at a publish the message store does not hold


@dataclass(frozen=True, slots=True)
class RecoveredSegment:
    num: int
    unacked_count: int
    slots: dict[int, JournalSlot]  # journal entries the segment file does not hold yet


@dataclass(frozen=True, slots=True)
class RecoveredState:
    recovery: Recovery
    next_seq_id: int
    segments: list[RecoveredSegment]
    needs_flush: bool  # dirty: the replayed journal must reach the segments and be truncated


@dataclass(frozen=True, slots=True)
class _Marker:
    next_seq_id: int
    unacked_counts: dict[int, int]


def segment_path(directory: Path, num: int) -> Path:
    return directory / f"{num}{SEGMENT_SUFFIX}"


def write_segments(directory: Path, appends: dict[int, bytes], deletes: list[int]) -> list[int]:
    """Append to segment files and fsync each, delete others; fsync the directory if an entry
    changed. Returns the deleted segments that had a file."""
    dir_changed = False
    for num, data in appends.items():
        path = segment_path(directory, num)
        dir_changed |= not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    deleted: list[int] = []
    for num in deletes:
        try:
            segment_path(directory, num).unlink()
        except FileNotFoundError:
            continue
        deleted.append(num)
        dir_changed = True
    if dir_changed:
        fsync_dir(directory)
    return deleted


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class SegmentFileCache:
    """The parsed files of the segments read last: a deliver or ack whose publish was flushed
    needs its segment's file, and so does a read. Callers drop a segment when its file changes."""

    __slots__ = ("_capacity", "_directory", "_entries", "_entries_per_segment")

    def __init__(self, directory: Path, entries_per_segment: int, capacity: int) -> None:
        self._directory = directory
        self._entries_per_segment = entries_per_segment
        self._capacity = capacity
        self._entries: OrderedDict[int, dict[int, SegmentEntry]] = OrderedDict()

    def get(self, num: int) -> dict[int, SegmentEntry]:
        entries = self._entries.get(num)
        if entries is not None:
            self._entries.move_to_end(num)
            return entries
        try:
            data = segment_path(self._directory, num).read_bytes()
        except FileNotFoundError:
            data = b""
        entries = parse_segment(data, self._entries_per_segment).entries
        self._entries[num] = entries
        if len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return entries

    def drop(self, num: int) -> None:
        self._entries.pop(num, None)

    def clear(self) -> None:
        self._entries.clear()


def segment_numbers_on_disk(directory: Path) -> set[int]:
    return {int(m.group(1)) for name in os.listdir(directory) if (m := _SEGMENT_NAME.match(name))}


@dataclass(frozen=True, slots=True)
class Meta:
    created: bool
    next_seq_id: int  # as of the last flush
    flushing: dict[int, int]  # segment -> its file's size before the flush that did not complete


def read_meta(directory: Path) -> tuple[int, Meta] | None:
    """queue_index.json as the last flush left it, with the entries_per_segment it was created with;
    None when there is none (no index here)."""

    def parse(data: bytes) -> tuple[int, Meta]:
        doc = json.loads(data)
        flushing = {int(num): int(size) for num, size in doc.get("flushing", [])}
        return int(doc["entries_per_segment"]), Meta(False, int(doc["next_seq_id"]), flushing)

    return read_with_backup(directory / META_FILE_NAME, parse)


def load_meta(directory: Path, entries_per_segment: int) -> Meta:
    """queue_index.json as the last flush left it; creates the file for a new index."""
    found = read_meta(directory)
    if found is None:
        write_meta(directory, entries_per_segment, 0)
        return Meta(True, 0, {})
    stored_entries_per_segment, meta = found
    if stored_entries_per_segment != entries_per_segment:
        raise QueueIndexError(f"{directory}: created with entries_per_segment={stored_entries_per_segment}, "
                              f"opened with {entries_per_segment}")
    return meta


def write_meta(directory: Path, entries_per_segment: int, next_seq_id: int,
               flushing: dict[int, int] | None = None) -> None:
    doc: dict[str, object] = {"version": FORMAT_VERSION, "entries_per_segment": entries_per_segment,
                              "next_seq_id": next_seq_id}
    if flushing:
        doc["flushing"] = [[num, size] for num, size in sorted(flushing.items())]
    write_atomic(directory / META_FILE_NAME, json.dumps(doc).encode())


def mark_appends(directory: Path, entries_per_segment: int, journal_fd: int, meta_next_seq_id: int,
                 nums: Iterable[int]) -> None:
    """Before a flush appends to the files of segments ``nums``: the journal durable, then the files'
    sizes in queue_index.json (see the module docstring)."""
    os.fsync(journal_fd)
    write_meta(directory, entries_per_segment, meta_next_seq_id, segment_sizes(directory, nums))


def segment_sizes(directory: Path, nums: Iterable[int]) -> dict[int, int]:
    """The size of each segment's file, 0 for none."""
    sizes = {}
    for num in nums:
        try:
            sizes[num] = os.stat(segment_path(directory, num)).st_size
        except FileNotFoundError:
            sizes[num] = 0
    return sizes


def write_marker(directory: Path, next_seq_id: int, unacked_counts: dict[int, int]) -> None:
    segments = [[num, count] for num, count in sorted(unacked_counts.items())]
    doc = {"version": FORMAT_VERSION, "next_seq_id": next_seq_id, "segments": segments}
    write_atomic(directory / CLEAN_FILE_NAME, json.dumps(doc).encode())


def take_marker(directory: Path) -> _Marker | None:
    """Read and delete the clean marker (durably); None if absent or unreadable, which only costs
    a dirty recovery. Its .bak and .tmp go too: never trusted, they must not outlive it."""
    path = directory / CLEAN_FILE_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = None
    removed = False
    for leftover in (path, Path(str(path) + BACKUP_SUFFIX), Path(str(path) + TMP_SUFFIX)):
        try:
            leftover.unlink()
            removed = True
        except FileNotFoundError:
            pass
    if removed:
        fsync_dir(directory)
    return _parse_marker(data)


def read_marker(directory: Path) -> _Marker | None:
    """The clean marker, left where it is; None if absent or unreadable."""
    try:
        return _parse_marker((directory / CLEAN_FILE_NAME).read_bytes())
    except FileNotFoundError:
        return None


def _parse_marker(data: bytes | None) -> _Marker | None:
    if data is None:
        return None
    try:
        doc = json.loads(data)
        return _Marker(int(doc["next_seq_id"]), {int(num): int(count) for num, count in doc["segments"]})
    except (ValueError, KeyError, TypeError):
        return None


def recover(directory: Path, entries_per_segment: int, journal_bytes: bytes, meta: Meta,
            marker: _Marker | None, check_publish: PublishCheck | None = None) -> RecoveredState:
    interrupted = cut_interrupted_appends(directory, meta.flushing)
    meta_next_seq_id = meta.next_seq_id
    on_disk = segment_numbers_on_disk(directory)
    if meta.flushing:
        reason = "a segment flush was interrupted"
    elif marker is None:
        reason = "no clean marker"
    elif journal_bytes:
        reason = "journal not empty"
    elif {num for num, count in marker.unacked_counts.items() if count > 0} != on_disk:
        reason = "segment files differ from the clean marker"
    else:
        segments = [RecoveredSegment(num, marker.unacked_counts[num], {}) for num in sorted(on_disk)]
        next_seq_id = max(marker.next_seq_id, meta_next_seq_id)
        return RecoveredState(Recovery(RecoveryKind.CLEAN), next_seq_id, segments, needs_flush=False)
    outline = Recovery(RecoveryKind.CREATED) if meta.created else \
        Recovery(RecoveryKind.DIRTY, reason, interrupted_appends=interrupted)
    return _recover_dirty(directory, entries_per_segment, journal_bytes, on_disk, meta_next_seq_id, outline,
                          check_publish)


def cut_interrupted_appends(directory: Path, flushing: dict[int, int]) -> int:
    """Cut each segment file a flush was appending to back to its size before that flush (see the
    module docstring); how many had more. The cuts are durable before anything reads the files."""
    cut = 0
    for num, size in sorted(flushing.items()):
        path = segment_path(directory, num)
        try:
            if os.stat(path).st_size <= size:
                continue
        except FileNotFoundError:
            continue
        _cut_segment(path, size)
        cut += 1
    return cut


def replayable_journal(journal_bytes: bytes, check_publish: PublishCheck | None) -> tuple[JournalParse, bool]:
    """The journal's whole records up to its torn tail, and up to the first publish ``check_publish``
    rejects (see the module docstring); with whether one was rejected."""
    parsed = parse_journal(journal_bytes)
    if check_publish is None:
        return parsed, False
    pos = 0
    for count, record in enumerate(parsed.records):
        if record.kind is JournalKind.PUBLISH and record.pub is not None and not check_publish(record.seq_id,
                                                                                               record.pub):
            return JournalParse(parsed.records[:count], pos, parsed.stop), True
        pos += decode_journal_record(journal_bytes, pos).size
    return parsed, False


def _recover_dirty(directory: Path, entries_per_segment: int, journal_bytes: bytes, on_disk: set[int],
                   meta_next_seq_id: int, outline: Recovery, check_publish: PublishCheck | None) -> RecoveredState:
    parsed, rejected = replayable_journal(journal_bytes, check_publish)
    by_segment, max_pub_seq_id = replay_journal(parsed.records, entries_per_segment)
    next_seq_id = max(meta_next_seq_id, max_pub_seq_id + 1)
    repaired_count = 0
    segments: list[RecoveredSegment] = []
    # one segment file in memory at a time: recovery stays bounded like the running index
    for num in sorted(on_disk | by_segment.keys()):
        entries = {}
        if num in on_disk:
            path = segment_path(directory, num)
            data = path.read_bytes()
            segment = parse_segment(data, entries_per_segment)
            if segment.valid_bytes < len(data):
                repaired_count += 1
                _cut_segment(path, segment.valid_bytes)
            entries = segment.entries
            if entries:
                next_seq_id = max(next_seq_id, num * entries_per_segment + max(entries) + 1)
        slots, unacked_count = journal_minus_segment(by_segment.get(num, {}), entries)
        # a file with nothing unacked stays listed so that the flush deletes it
        if unacked_count or slots or segment_path(directory, num).exists():
            segments.append(RecoveredSegment(num, unacked_count, slots))
    recovery = Recovery(outline.kind, outline.reason, len(parsed.records),
                        len(journal_bytes) - parsed.valid_bytes, repaired_count, outline.interrupted_appends,
                        rejected)
    return RecoveredState(recovery, next_seq_id, segments, needs_flush=True)


def _cut_segment(path: Path, valid_bytes: int) -> None:
    """Drop a torn tail, so that the next append does not land behind bytes no parse gets past."""
    if valid_bytes == 0:
        path.unlink()
        fsync_dir(path.parent)
        return
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, valid_bytes)
        os.fsync(fd)
    finally:
        os.close(fd)
