"""QueueIndex: per (group, topic, queue), RabbitMQ's classic queue index over the commitlog.

Every message of an ack-mode queue has a ``seq_id`` (its consume-queue offset) and goes publish ->
deliver -> ack, each event appended to ``journal.jif`` with one ``write`` per batch and no fsync
(``sync`` is the owner's call) and mirrored in memory per segment (``seq_id // entries_per_segment``).
Past ``max_journal_entries`` unflushed records, on ``flush`` (the queue went idle) and on a clean
``close``, the journal goes into the ``{segment}.idx`` files, fsynced before the journal is
truncated; a segment with nothing unacked has its file deleted instead (``mqstore.engine.ackindex.files``).
A publish carries the offsetMsgId bytes of its message, which stays in the commitlog.

Memory holds the segments with unacked messages (``mqstore.engine.ackindex.segments``: unacked counts,
journal slots, ``redelivered`` when delivered before this open) and the parsed files of the few
segments touched last (``_SEGMENT_CACHE_COUNT``). Byte layouts: ``mqstore.engine.ackindex.codec``;
journal slots: ``mqstore.engine.ackindex.slots``; files and recovery: ``mqstore.engine.ackindex.files``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from mqstore.engine.ackindex.codec import (
    MAX_ENTRIES_PER_SEGMENT,
    MAX_SEQ_ID,
    PubRecord,
    encode_journal_ack,
    encode_journal_deliver,
    encode_journal_publish,
)
from mqstore.engine.ackindex.files import (
    JOURNAL_FILE_NAME,
    PublishCheck,
    QueueIndexError,
    RecoveredState,
    Recovery,
    RecoveryKind,
    SegmentFileCache,
    load_meta,
    mark_appends,
    recover,
    take_marker,
    write_all,
    write_marker,
    write_meta,
    write_segments,
)
from mqstore.engine.ackindex.segments import IndexEntry, PublishEntry, Segment
from mqstore.engine.ackindex.slots import EMPTY_SLOT, JournalSlot
from mqstore.engine.meta.metafile import StrPath, fsync_dir, make_dirs

DEFAULT_ENTRIES_PER_SEGMENT = 16384
DEFAULT_MAX_JOURNAL_ENTRIES = 65536
_SEGMENT_CACHE_COUNT = 4

__all__ = ["DEFAULT_ENTRIES_PER_SEGMENT", "DEFAULT_MAX_JOURNAL_ENTRIES", "FlushResult", "IndexEntry", "PublishEntry",
           "QueueIndex", "QueueIndexError", "Recovery", "RecoveryKind"]


@dataclass(frozen=True, slots=True)
class FlushResult:
    written_segments: tuple[int, ...] = ()
    deleted_segments: tuple[int, ...] = ()


class QueueIndex:
    __slots__ = ("_cache", "_dir", "_dirty_count", "_embed_threshold_bytes", "_entries_per_segment", "_failed",
                 "_journal_fd", "_max_journal_entries", "_meta_next_seq_id", "_next_seq_id", "_recovery",
                 "_segments", "_unacked_count")

    def __init__(self, directory: Path, entries_per_segment: int, max_journal_entries: int,
                 embed_threshold_bytes: int, journal_fd: int, meta_next_seq_id: int) -> None:
        self._dir = directory
        self._entries_per_segment = entries_per_segment
        self._max_journal_entries = max_journal_entries
        self._embed_threshold_bytes = embed_threshold_bytes
        self._journal_fd: int | None = journal_fd
        self._meta_next_seq_id = meta_next_seq_id
        self._next_seq_id = meta_next_seq_id
        self._segments: dict[int, Segment] = {}
        self._cache = SegmentFileCache(directory, entries_per_segment, _SEGMENT_CACHE_COUNT)
        self._dirty_count = 0
        self._unacked_count = 0
        self._failed: BaseException | None = None
        self._recovery = Recovery(RecoveryKind.CREATED)

    @classmethod
    def open(cls, directory: StrPath, *, entries_per_segment: int = DEFAULT_ENTRIES_PER_SEGMENT,
             max_journal_entries: int = DEFAULT_MAX_JOURNAL_ENTRIES, embed_threshold_bytes: int = 0,
             check_publish: PublishCheck | None = None) -> QueueIndex:
        """Open or create the index in ``directory`` and recover it (see the module docstring).

        ``embed_threshold_bytes``: a publish's body shorter than this is kept in the index; 0 never.
        ``check_publish``: a dirty recovery replays the journal up to the first publish it rejects
        (``mqstore.engine.ackindex.files``: a torn page can parse as a publish).
        """
        if not 1 <= entries_per_segment <= MAX_ENTRIES_PER_SEGMENT:
            raise ValueError(f"entries_per_segment must be 1..{MAX_ENTRIES_PER_SEGMENT}, got {entries_per_segment}")
        if max_journal_entries < 1 or embed_threshold_bytes < 0:
            raise ValueError("max_journal_entries must be positive and embed_threshold_bytes not negative")
        path = Path(os.path.abspath(os.fspath(directory)))
        make_dirs(path)  # group, topic and queue directories: each name durable
        meta = load_meta(path, entries_per_segment)
        # gone before anything is written: a crash from here on must read as dirty
        marker = take_marker(path)
        journal_path = path / JOURNAL_FILE_NAME
        journal_bytes = journal_path.read_bytes() if journal_path.exists() else None
        fd = os.open(journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        index = cls(path, entries_per_segment, max_journal_entries, embed_threshold_bytes, fd, meta.next_seq_id)
        try:
            if journal_bytes is None:
                fsync_dir(path)
            index._apply(recover(path, entries_per_segment, journal_bytes or b"", meta, marker, check_publish))
        except BaseException:
            os.close(fd)
            raise
        return index

    # --- state --------------------------------------------------------------------------------

    @property
    def entries_per_segment(self) -> int:
        return self._entries_per_segment

    @property
    def recovery(self) -> Recovery:
        return self._recovery

    @property
    def next_seq_id(self) -> int:
        """One past the highest seq_id ever published; the next publish must be at least this."""
        return self._next_seq_id

    @property
    def unacked_count(self) -> int:
        return self._unacked_count

    @property
    def dirty_count(self) -> int:
        """Journal records not yet flushed into segments."""
        return self._dirty_count

    @property
    def segment_numbers(self) -> list[int]:
        """Segments with unacked messages or unflushed journal entries."""
        return sorted(self._segments)

    @property
    def bounds(self) -> tuple[int, int]:
        """RabbitMQ's ``bounds``: segment-aligned [first, past last) around the unacked messages,
        (0, 0) when there are none. Costs no I/O; ``lowest_unacked_seq_id`` is exact."""
        live = [num for num, seg in self._segments.items() if seg.unacked_count]
        if not live:
            return 0, 0
        return min(live) * self._entries_per_segment, (max(live) + 1) * self._entries_per_segment

    @property
    def closed(self) -> bool:
        return self._journal_fd is None

    def lowest_unacked_seq_id(self) -> int:
        """The lowest unacked seq_id, or ``next_seq_id`` when none is. Reads the first live segment in
        growing windows: the lowest is usually near its start, and a whole segment is 16,384 entries."""
        live = sorted(num for num, seg in self._segments.items() if seg.unacked_count)
        for num in live:
            base = num * self._entries_per_segment
            start, window, end = base, 64, base + self._entries_per_segment
            while start < end:
                entries = self.read(start, min(start + window, end))
                if entries:
                    return entries[0].seq_id
                start, window = start + window, window * 4
        return self._next_seq_id

    # --- writes -------------------------------------------------------------------------------

    def publish(self, seq_id: int, msg_id: bytes, size_bytes: int, expiry_ms: int = 0,
                body: bytes | None = None) -> None:
        self.publish_many([PublishEntry(seq_id, msg_id, size_bytes, expiry_ms, body)])

    def publish_many(self, entries: Iterable[PublishEntry]) -> int:
        """Append publishes in one write. seq_ids must rise and start at ``next_seq_id`` or above
        (gaps are fine): a lower one raises and nothing of the batch is written."""
        self._require_writable()
        staged: list[tuple[int, PubRecord]] = []
        parts: list[bytes] = []
        next_seq_id = self._next_seq_id
        for entry in entries:
            if not next_seq_id <= entry.seq_id <= MAX_SEQ_ID:
                raise QueueIndexError(f"publish of seq_id {entry.seq_id}: the next seq_id is {next_seq_id}")
            body = entry.body if entry.body and len(entry.body) < self._embed_threshold_bytes else None
            pub = PubRecord(entry.msg_id, entry.expiry_ms, entry.size_bytes, body)
            parts.append(encode_journal_publish(entry.seq_id, pub))
            staged.append((entry.seq_id, pub))
            next_seq_id = entry.seq_id + 1
        self._append_journal(b"".join(parts))
        for seq_id, pub in staged:
            num, rel_seq = divmod(seq_id, self._entries_per_segment)
            seg = self._segments.get(num)
            if seg is None:
                seg = self._segments[num] = Segment(num)
            seg.slots[rel_seq] = JournalSlot(pub)
            seg.unacked_count += 1
        self._unacked_count += len(staged)
        self._next_seq_id = next_seq_id
        self._dirty_count += len(staged)
        self._maybe_flush()
        return len(staged)

    def deliver(self, seq_ids: Iterable[int]) -> int:
        """Record first deliveries; returns how many. Already delivered, acked or never
        published seq_ids are skipped: a redelivery is not an index event."""
        return self._deliver_or_ack(seq_ids, ack=False)

    def ack(self, seq_ids: Iterable[int]) -> int:
        """Record acks; returns how many. An undelivered message is delivered first (a segment
        tells delivery and ack apart by position); acked or unknown seq_ids are skipped."""
        return self._deliver_or_ack(seq_ids, ack=True)

    def _deliver_or_ack(self, seq_ids: Iterable[int], ack: bool) -> int:
        self._require_writable()
        staged: dict[tuple[int, int], JournalSlot | None] = {}  # None: publish, deliver, ack cancelled
        unacked_deltas: dict[int, int] = {}
        parts: list[bytes] = []
        for seq_id in seq_ids:
            if seq_id < 0:
                raise ValueError(f"negative seq_id {seq_id}")
            num, rel_seq = divmod(seq_id, self._entries_per_segment)
            seg = self._segments.get(num)
            if seq_id >= self._next_seq_id or seg is None:
                continue
            key = (num, rel_seq)
            slot = staged[key] if key in staged else seg.slots.get(rel_seq)
            view = seg.view(rel_seq, slot, self._cache)
            if view is None or view.acked or (view.delivered and not ack):
                continue
            slot = slot or EMPTY_SLOT
            if not view.delivered:
                parts.append(encode_journal_deliver(seq_id))
                slot = JournalSlot(slot.pub, True, False)
            if ack:
                parts.append(encode_journal_ack(seq_id))
                unacked_deltas[num] = unacked_deltas.get(num, 0) - 1
            staged[key] = None if ack and slot.pub is not None else JournalSlot(slot.pub, slot.delivered, ack)
        self._append_journal(b"".join(parts))
        for (num, rel_seq), new_slot in staged.items():
            slots = self._segments[num].slots
            if new_slot is None:
                slots.pop(rel_seq, None)
            else:
                slots[rel_seq] = new_slot
        for num, delta in unacked_deltas.items():
            self._segments[num].unacked_count += delta
            self._unacked_count += delta
        self._dirty_count += len(parts)
        self._maybe_flush()
        return len(staged)

    def ack_below(self, seq_id: int) -> int:
        """Every message below ``seq_id`` acked and ``next_seq_id`` at least ``seq_id`` (another copy of
        the queue says so: a slave's master), durably: the acks in the journal, the journal fsynced,
        then a flush. Never backwards (``next_seq_id`` only rises); how many it acked."""
        if not 0 <= seq_id <= MAX_SEQ_ID + 1:
            raise ValueError(f"ack_below {seq_id}: out of range")
        acked = self.ack([entry.seq_id for entry in self.read(0, min(seq_id, self._next_seq_id))])
        if acked or seq_id > self._next_seq_id:
            self.sync()
            self._next_seq_id = max(self._next_seq_id, seq_id)
            self._flush()
        return acked

    def flush(self) -> FlushResult:
        """Move the journal into the segment files (fsynced), delete fully acked segments' files,
        then truncate the journal. The owner calls it when the queue goes idle."""
        self._require_writable()
        return self._flush() if self._dirty_count else FlushResult()

    def sync(self) -> None:
        """fsync the journal: every event written so far survives a machine crash."""
        fd = self._require_writable()
        try:
            os.fsync(fd)
        except OSError as exc:
            self._failed = exc
            raise

    def close(self, clean: bool = True) -> None:
        """``clean``: flush and leave the marker that lets the next open skip reading segments.
        ``clean=False`` closes as a crash would (nothing flushed). A failed index never closes clean."""
        fd = self._journal_fd
        if fd is None:
            return
        try:
            if clean and self._failed is None:
                self._flush()
                write_marker(self._dir, self._next_seq_id,
                             {num: seg.unacked_count for num, seg in self._segments.items()})
        finally:
            self._journal_fd = None
            self._cache.clear()
            os.close(fd)

    def __enter__(self) -> QueueIndex:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(clean=exc is None)

    # --- reads --------------------------------------------------------------------------------

    def read(self, start_seq_id: int, end_seq_id: int) -> list[IndexEntry]:
        """Unacked messages with start <= seq_id < end, in seq_id order (RabbitMQ's ``read``)."""
        if self._journal_fd is None:
            raise QueueIndexError(f"{self._dir}: queue index is closed")
        if not 0 <= start_seq_id <= end_seq_id:
            raise ValueError(f"bad range [{start_seq_id}, {end_seq_id})")
        end_seq_id = min(end_seq_id, self._next_seq_id)
        out: list[IndexEntry] = []
        for num in sorted(self._segments):
            out.extend(self._segments[num].unacked(start_seq_id, end_seq_id, self._cache, self._entries_per_segment))
        return out

    def pending_redelivery(self, start_seq_id: int, end_seq_id: int) -> list[IndexEntry]:
        """Unacked messages delivered before this open: due again, with the redelivered flag."""
        return [entry for entry in self.read(start_seq_id, end_seq_id) if entry.redelivered]

    # --- internals ----------------------------------------------------------------------------

    def _apply(self, state: RecoveredState) -> None:
        self._recovery = state.recovery
        self._next_seq_id = state.next_seq_id
        for recovered in state.segments:
            seg = Segment(recovered.num, recovered.unacked_count, dict(recovered.slots))
            self._segments[recovered.num] = seg
            self._unacked_count += recovered.unacked_count
            self._dirty_count += len(recovered.slots)
        if state.needs_flush:
            # RabbitMQ's init_dirty ends the same way: replayed entries go to the segments and the
            # journal, torn tail included, is truncated before any new record is appended to it
            self._flush()
        for seg in self._segments.values():
            seg.note_recovered_size(self._dir)

    def _require_writable(self) -> int:
        if self._journal_fd is None:
            raise QueueIndexError(f"{self._dir}: queue index is closed")
        if self._failed is not None:
            raise QueueIndexError(f"{self._dir}: queue index refuses writes after a failed one: {self._failed}")
        return self._journal_fd

    def _append_journal(self, data: bytes) -> None:
        fd = self._require_writable()
        try:
            write_all(fd, data)
        except OSError as exc:
            # a partial record may now end the journal, and any record appended after it would be
            # unreadable: refuse every later write instead
            self._failed = exc
            raise

    def _maybe_flush(self) -> None:
        if self._dirty_count > self._max_journal_entries:
            self._flush()

    def _flush(self) -> FlushResult:
        fd = self._require_writable()
        appends: dict[int, bytes] = {}
        emptied: list[int] = []
        for num in sorted(self._segments):
            seg = self._segments[num]
            if seg.unacked_count == 0:
                emptied.append(num)
            elif seg.slots:
                appends[num] = seg.encode_slots()
        try:
            if appends:  # a power cut may tear them: recovery cuts them off and replays the journal
                mark_appends(self._dir, self._entries_per_segment, fd, self._meta_next_seq_id, appends)
            deleted = write_segments(self._dir, appends, emptied)
            if appends or self._next_seq_id != self._meta_next_seq_id:
                # before the journal goes: it may be the last place that shows the next seq_id
                write_meta(self._dir, self._entries_per_segment, self._next_seq_id)
                self._meta_next_seq_id = self._next_seq_id
            os.ftruncate(fd, 0)
            # a stale journal after a machine crash would be replayed over the segments again
            os.fsync(fd)
        except OSError as exc:
            # memory no longer says what the files hold: refuse writes, the next open recovers
            self._failed = exc
            raise
        for num in appends:
            self._segments[num].slots.clear()
            self._cache.drop(num)
        for num in emptied:
            del self._segments[num]
            self._cache.drop(num)
        self._dirty_count = 0
        return FlushResult(tuple(appends), tuple(deleted))
