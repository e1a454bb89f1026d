"""What a reader process sees of the store: the files mapped read-only, bounded by what the builders
have published as complete.

The consume-queue builder announces progress on ``arrived`` (each changed queue's next offset, and
``applied``: every commitlog byte before it is in the consume queues). A reader keeps, per queue, the
highest next offset announced, and ``readable_end``, the highest ``applied``; no record at or past
``readable_end`` and no entry at or past a queue's published offset is ever read. PUB/SUB drops, so
the same facts are also read off the files: at start, for a queue the reader has no notice for yet,
and whenever a pull finds nothing new. A file scan trusts an entry only when the record it points at
is really there (same size, queue and queue offset): the builder may be writing the very entry read.
A read-only mapping sees every file at its full size, so nothing here relies on
``ConsumeQueue.max_queue_offset`` or ``CommitLog.max_offset``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.engine.config import Geometry
from mqstore.engine.consumequeue.consume_queue import ConsumeQueue, queue_offset_by_time
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE, CqEntries, entry_live, entry_valid, valid_prefix
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.log.record import DecodeKind, Record
from mqstore.engine.meta.topics import TOPICS_FILE, TopicTable
from mqstore.engine.read.lookup import (
    GetResult,
    GetStatus,
    PullLimits,
    StoredRecords,
    TagFilter,
    get_messages,
    query_by_key,
    query_keys,
    view_by_id,
)

QueueKey = tuple[str, int]
FIRST_SCAN_ENTRIES, MAX_SCAN_ENTRIES = 64, 4096  # a scan for news starts small, grows while every entry is valid
LONG_MAX = (1 << 63) - 1     # Java's Long.MAX_VALUE: no offset a request or notice names is larger
INDEX_REFRESH_MS = 1_000  # how soon a deleted or a new (not rolled to) index file is noticed


@dataclass(frozen=True, slots=True)
class PublishedQueue:
    """A consume queue cut at its published end: what ``get_messages`` and the time search read."""

    cq: ConsumeQueue
    min_queue_offset: int
    max_queue_offset: int

    @property
    def topic(self) -> str:
        return self.cq.topic

    @property
    def queue_id(self) -> int:
        return self.cq.queue_id

    @property
    def entries_per_file(self) -> int:
        return self.cq.entries_per_file

    def read(self, queue_offset: int, max_count: int) -> CqEntries:
        return self.cq.read(queue_offset, max(0, min(max_count, self.max_queue_offset - queue_offset)))


class PublishedStore:
    def __init__(self, store_dir: Path, geometry: Geometry, *, index_enabled: bool,
                 now_ms: Callable[[], int], open_files: OpenFiles | None = None) -> None:
        self.store_dir = store_dir
        self.commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size, writable=False,
                                        open_files=open_files)
        self.queues = ConsumeQueueStore.open(store_dir / "consumequeue", geometry.cq_entries_per_file,
                                             writable=False, open_files=open_files)
        self.index = IndexService.open(store_dir / "index", geometry.index_slot_count, geometry.index_entry_count,
                                       now_ms, writable=False, open_files=open_files) if index_enabled else None
        self.published: dict[QueueKey, int] = {}   # next queue offset the builder has published
        self.min_offsets: dict[QueueKey, int] = {}  # first live entry (fillers and expired records skipped)
        self.readable_end = self.commitlog.min_offset
        self._commitlog_min = self.commitlog.min_offset
        self._topics = TopicTable.load(store_dir, now_ms)
        self._topics_seen = self._topics_stamp()
        self._now_ms = now_ms
        self._next_index_refresh_ms = 0
        self.deleted_topics: set[str] = set()  # seen deleted under this reader, until made again
        self._queues_root = str(self.queues.root)  # ``deleted`` on every empty pull: a Path costs more than a stat

    def close(self) -> None:
        self.queues.close()
        if self.index is not None:
            self.index.close()
        self.commitlog.close()

    # -- learning what is published ------------------------------------------------------------------

    def learn_from_files(self) -> None:
        """At start: every queue's published end read off the files."""
        self.commitlog.queue.refresh()
        offsets, _ = self.queues.published_state()
        for (topic, queue_id), end in offsets.items():
            cq = self.queues.get(topic, queue_id)
            if cq is not None:
                start = self._live_min(cq, cq.min_queue_offset)
                self.min_offsets[(topic, queue_id)] = start
                self._settle(cq, start, max(end, start))

    def on_arrived(self, queues: list[Any], applied: int) -> list[QueueKey]:
        """Apply one ``arrived`` notice; returns the queues that grew."""
        grew: list[QueueKey] = []
        self.readable_end = max(self.readable_end, applied)
        for topic, queue_id, max_queue_offset in queues:
            key = (topic, queue_id)
            if max_queue_offset < self.published.get(key, 0):
                if not self._remade(key):
                    continue  # a notice older than what a recheck read off the files: nothing shrank
                self._forget_topic(topic)  # a queue only grows, unless its topic was deleted and made again
            if key not in self.published:
                cq = self.queues.get(topic, queue_id)
                if cq is None:
                    continue  # not visible here yet: a later pull or recheck learns it from the files
                cq.queue.refresh()
                self.min_offsets[key] = self._live_min(cq, cq.min_queue_offset)
            if max_queue_offset > self.published.get(key, 0):
                self.published[key] = max_queue_offset
                grew.append(key)
        return grew

    def _remade(self, key: QueueKey) -> bool:
        """Whether a queue's mapped files are gone or replaced (else a lower max is only an old notice):
        its last file tells, one stat (a topic made again replaces every file, retention leading ones)."""
        cq = self.queues.get(*key)
        last = cq.queue.last_file if cq is not None else None
        return last is None or last.replaced()

    def recheck(self, topic: str, queue_id: int) -> bool:
        """Read a queue's news off its files (a notice may have been dropped); True when it grew. Its
        directory is listed (every empty pull rechecks) only when its known end reaches past its last
        mapped file: the builder fills a file before it starts the next."""
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return False
        key = (topic, queue_id)
        if key not in self.min_offsets:
            cq.queue.refresh()
            self.min_offsets[key] = self._live_min(cq, cq.min_queue_offset)
        known = self.published.get(key, self.min_offsets[key])
        start = max(known, self.min_offsets[key])
        if cq.queue.last_file is None or start * CQ_ENTRY_SIZE >= cq.queue.last_file.file_end:
            cq.queue.refresh()
        return self._settle(cq, known, _scan_valid(cq, start))

    def _settle(self, cq: ConsumeQueue, known: int, end: int) -> bool:
        """Publish ``end`` for ``cq`` once its last entry proves complete; moves readable_end along."""
        key = (cq.topic, cq.queue_id)
        # Only the entry being written can be torn (the builder writes one at a time), so the one
        # before it must prove; if neither does, nothing new is believed.
        for candidate in (end, end - 1):
            if candidate <= known:
                end = known
                break
            proven = self._proven_end(cq, candidate - 1)
            if proven >= 0:
                self.readable_end = max(self.readable_end, proven)
                end = candidate
                break
        else:
            end = known
        grew = end > self.published.get(key, -1)
        if grew:
            self.published[key] = end
        return grew and end > known

    def _proven_end(self, cq: ConsumeQueue, queue_offset: int) -> int:
        """The commitlog end of the entry's record when the entry is valid and the record it points at
        is really there (the builder may be writing the very entry read), else -1."""
        entry = cq.entry(queue_offset)
        if entry is None or not entry_valid(entry[0], entry[1]):
            return -1
        phys_offset, size, _ = entry
        if phys_offset < self.commitlog.min_offset:
            return phys_offset + size  # retention took the record: the entry itself is old news
        self._map_commitlog(phys_offset + size)
        decoded = self.commitlog.read_record(phys_offset, check_crc=False, read_body=False)
        record = decoded.record
        if (decoded.kind is not DecodeKind.RECORD or record is None or record.size != size
                or record.queue_offset != queue_offset or record.queue_id != cq.queue_id):
            return -1
        return phys_offset + size

    def _live_min(self, cq: ConsumeQueue, start: int) -> int:
        """The first entry that is neither a filler nor points below the commitlog's min offset."""
        commitlog_min = self.commitlog.min_offset
        queue_offset = max(start, cq.min_queue_offset)
        while True:
            entries = cq.read(queue_offset, MAX_SCAN_ENTRIES)
            if len(entries) == 0:
                return queue_offset
            n_valid = valid_prefix(entries)
            live = entry_live(entries["phys_offset"][:n_valid], entries["size"][:n_valid], commitlog_min)
            if bool(live.any()):
                return queue_offset + int(live.argmax())
            queue_offset += n_valid
            if n_valid < len(entries):
                return queue_offset

    def _map_commitlog(self, phys_end: int) -> None:
        last = self.commitlog.queue.last_file
        if last is None or last.file_end < phys_end:
            self.commitlog.queue.refresh()

    def refresh_files(self) -> None:
        """Retention deletes old commitlog and queue files: forget them and move the queues' min."""
        self.commitlog.queue.refresh()
        if self.commitlog.min_offset == self._commitlog_min:
            return
        self._commitlog_min = self.commitlog.min_offset
        self.readable_end = max(self.readable_end, self._commitlog_min)
        for key, old_min in list(self.min_offsets.items()):
            cq = self.queues.get(*key)
            if cq is not None:
                cq.queue.refresh()
                self.min_offsets[key] = min(self._live_min(cq, old_min), self.published.get(key, old_min))

    def deleted(self, topic: str, queue_id: int) -> bool:
        """Whether ``topic`` was deleted (``mqstore topics delete``) while this reader knew it: a queue
        it had mapped whose directory is gone. Its maps are closed; a topic made again is live again."""
        if topic in self.deleted_topics:
            if not os.path.isdir(f"{self._queues_root}/{topic}"):
                return True
            self.deleted_topics.discard(topic)
        if (topic, queue_id) not in self.queues.queues or os.path.isdir(f"{self._queues_root}/{topic}/{queue_id}"):
            return False
        self._forget_topic(topic)
        self.deleted_topics.add(topic)
        return True

    def _forget_topic(self, topic: str) -> None:
        """Close a deleted topic's maps and forget what was published of it."""
        self.queues.close_topic(topic)
        for table in (self.published, self.min_offsets):
            for key in [k for k in table if k[0] == topic]:
                del table[key]

    # -- reads ---------------------------------------------------------------------------------------

    def published_queue(self, topic: str, queue_id: int) -> PublishedQueue | None:
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return None
        key = (topic, queue_id)
        if key not in self.published:
            self.recheck(topic, queue_id)
        max_queue_offset = self.published.get(key, 0)
        if cq.queue.last_file is None or cq.queue.max_offset < max_queue_offset * CQ_ENTRY_SIZE:
            cq.queue.refresh()
        self._map_commitlog(self.readable_end)
        min_queue_offset = min(max(cq.min_queue_offset, self.min_offsets.get(key, 0)), max_queue_offset)
        return PublishedQueue(cq, min_queue_offset, max_queue_offset)

    def pull(self, topic: str, queue_id: int, queue_offset: int, limits: PullLimits,
             tag_filter: TagFilter, *, stored: bool = False) -> GetResult:
        """mqstore.engine.read.lookup.get_messages over the published queue; ``stored``: the records' bytes."""
        view = self.published_queue(topic, queue_id)
        result = get_messages(view, self.commitlog, queue_offset, limits, tag_filter, self.readable_end,
                              stored=stored)
        if result.status in (GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_WAS_REMOVING):
            self.refresh_files()
        return result

    def record_at(self, phys_offset: int, size: int) -> Record | None:
        """The record a published consume-queue entry points at (ack mode reads by entry); None when
        retention took it or it is not the ``size``-byte record the entry names. A published entry's
        record is complete, which is why ``readable_end`` need not bound this read."""
        if phys_offset < self.commitlog.min_offset:
            return None
        self._map_commitlog(phys_offset + size)
        decoded = self.commitlog.read_record(phys_offset, check_crc=False)
        record = decoded.record
        if decoded.kind is not DecodeKind.RECORD or record is None or record.size != size:
            return None
        return record

    def query_by_key(self, topic: str, key: str, max_count: int, begin_ms: int, end_ms: int, *,
                     uniq: bool = False) -> list[Record]:
        """mqstore.engine.read.lookup.query_by_key, reading only what is complete (``_query_end``)."""
        if self.index is None:
            return []
        return query_by_key(self.index, self.commitlog, topic, key, max_count, begin_ms, end_ms, uniq=uniq,
                            readable_end=self._query_end(self.index))

    def query_by_keys(self, topic: str, keys: list[str], max_count: int, begin_ms: int, end_ms: int, *,
                      uniq: bool = False) -> list[StoredRecords]:
        """``query_keys``, one StoredRecords a key."""
        records, counts = self.query_keys(topic, keys, max_count, begin_ms, end_ms, uniq=uniq)
        return records.split(counts)

    def query_keys(self, topic: str, keys: list[str], max_count: int, begin_ms: int, end_ms: int, *,
                   uniq: bool = False) -> tuple[StoredRecords, list[int]]:
        """``lookup.query_keys`` (the records as stored, one key after another, and how many each key
        has), reading only what is complete."""
        if self.index is None:
            return StoredRecords(b"", [], [], []), [0] * len(keys)
        return query_keys(self.index, self.commitlog, topic, keys, max_count, begin_ms, end_ms, uniq=uniq,
                          readable_end=self._query_end(self.index))

    def _query_end(self, index: IndexService) -> int:
        """How far a query may read: ``readable_end``, or past it the end of the newest indexed record.
        The index builder puts a key only once its record is written whole, so what the index points
        at is complete even when this reader missed the ``arrived`` notice that would have moved
        ``readable_end`` (nothing repeats a notice). The list of index files is read again only when
        the newest is full, when there is none, or every INDEX_REFRESH_MS."""
        last = index.last_file
        now = self._now_ms()
        if last is None or last.is_full or now >= self._next_index_refresh_ms:
            index.refresh()
            self._next_index_refresh_ms = now + INDEX_REFRESH_MS
            last = index.last_file
        end = self.readable_end
        if last is not None and last.index_count > 1 and last.end_phys_offset >= end:
            self._map_commitlog(last.end_phys_offset + 1)
            end = max(end, last.end_phys_offset + max(self.commitlog.size_at(last.end_phys_offset), 0))
        self._map_commitlog(end)
        return end

    def stored(self, records: list[Record]) -> StoredRecords:
        """``records`` (read from this store) as stored, back to back, with their columns."""
        chunks = [self.commitlog.read_bytes(r.phys_offset, r.size) for r in records]
        missing = [r.phys_offset for r, chunk in zip(records, chunks, strict=True) if chunk is None]
        if missing:
            raise ValueError(f"records at {missing} are no longer in the commitlog")
        return StoredRecords(b"".join(c for c in chunks if c is not None), [r.queue_offset for r in records],
                             [r.phys_offset for r in records], [r.size for r in records])

    def view_by_id(self, msg_id: str) -> Record | None:
        """The record an offsetMsgId points at; raises MessageIdError (a ValueError) on a bad id."""
        self._map_commitlog(self.readable_end)
        return view_by_id(self.commitlog, msg_id, self.readable_end)

    def queue_offset_by_time(self, topic: str, queue_id: int, ts_ms: int, *, upper: bool) -> int:
        view = self.published_queue(topic, queue_id)
        if view is None:
            return 0
        return queue_offset_by_time(view, ts_ms, self.commitlog.store_ms_at, upper=upper)

    def queue_info(self, topic: str) -> dict[int, tuple[int, int]]:
        """Every queue of ``topic`` (configured, or with files) with its published [min, max)."""
        queue_ids = set(self._queue_ids_on_disk(topic))
        config = self._topic_table().get(topic)
        if config is not None:
            queue_ids.update(range(config.queue_count))
        info: dict[int, tuple[int, int]] = {}
        for queue_id in sorted(queue_ids):
            view = self.published_queue(topic, queue_id)
            info[queue_id] = (view.min_queue_offset, view.max_queue_offset) if view else (0, 0)
        return info

    def _queue_ids_on_disk(self, topic: str) -> list[int]:
        topic_dir = self.queues.root / topic
        if not topic_dir.is_dir():
            return []
        return [int(p.name) for p in topic_dir.iterdir() if p.is_dir() and p.name.isdigit()]

    def _topics_stamp(self) -> tuple[int, int, int]:
        """Which topics.json is there: the writer replaces it whole (a new file each time), so its
        inode and size tell two writes apart even within one tick of the clock that stamps mtime."""
        try:
            st = os.stat(self.store_dir / TOPICS_FILE)
        except FileNotFoundError:
            return (0, 0, 0)
        return (st.st_mtime_ns, st.st_ino, st.st_size)

    def _topic_table(self) -> TopicTable:
        """topics.json, re-read when the writer replaced it."""
        stamp = self._topics_stamp()
        if stamp != self._topics_seen:
            self._topics = TopicTable.load(self.store_dir, self._now_ms)
            self._topics_seen = stamp
        return self._topics


def _scan_valid(cq: ConsumeQueue, queue_offset: int) -> int:
    """The queue offset after the last valid entry from ``queue_offset`` on, reading only as far as
    entries stay valid (a read-only mapping shows zeros past the builder's end)."""
    batch = FIRST_SCAN_ENTRIES
    while True:
        entries = cq.read(queue_offset, batch)
        if len(entries) == 0:
            return queue_offset
        n_valid = valid_prefix(entries)
        queue_offset += n_valid
        if n_valid < len(entries):
            return queue_offset
        batch = min(batch * 2, MAX_SCAN_ENTRIES)
