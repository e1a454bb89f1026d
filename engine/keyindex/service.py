"""The ``{store}/index/`` directory: RocketMQ's IndexService over a list of IndexFiles.

Files are named by the local time at creation (``mqstore.engine.keyindex.file_names``), so name order is
creation order. Only the newest file is written; when it is full a new one is created, seeded with the
previous file's end offset and end time, and the full file is flushed. Every indexed record's
offset is >= the newest file's ``end_phys_offset``, so offsets never decrease along the list,
which is what deduplication on re-dispatch and truncation after a torn commitlog tail rely on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.engine.keyindex.file_names import index_file_names, next_index_file_name, remove_unfinished
from mqstore.engine.keyindex.index_file import IndexFile, IndexFileError
from mqstore.engine.keyindex.keys import index_hashes, index_key, java_key_hashes, record_keys
from mqstore.engine.keyindex.pages import IndexCursor, QueryOffsetResult, QueryPages, select_pages
from mqstore.engine.keyindex.probe import KeyProbe
from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.meta.metafile import make_dirs

DEFAULT_MAX_MSGS_NUM_BATCH = 64
# what ``build_records`` takes of a record: topic, KEYS tokens, UNIQ_KEY, phys offset, store time, sysFlag
IndexedRecord = tuple[str, Sequence[str], "str | None", int, int, int]
TRANSACTION_TYPE_MASK = 0xC
TRANSACTION_ROLLBACK_TYPE = 0xC


class IndexService:
    """Owner of one index directory: build on dispatch, query by key, delete and truncate."""

    __slots__ = (
        "__weakref__",
        "_entry_count",
        "_files",
        "_flushed_full",
        "_index_dir",
        "_index_msg_ms",
        "_max_msgs_num_batch",
        "_now_ms",
        "_open_files",
        "_slot_count",
        "_writable",
    )

    def __init__(
        self,
        index_dir: Path,
        slot_count: int,
        entry_count: int,
        now_ms: Callable[[], int],
        max_msgs_num_batch: int,
        files: list[IndexFile],
        open_files: OpenFiles | None = None,
    ) -> None:
        self._index_dir = index_dir
        self._slot_count = slot_count
        self._entry_count = entry_count
        self._now_ms = now_ms
        self._max_msgs_num_batch = max_msgs_num_batch
        self._files = files
        self._flushed_full: set[str] = set()
        self._index_msg_ms = 0
        self._writable = True
        self._open_files = open_files  # the process's bounded set of open files (None: every file stays mapped)
        if open_files is not None:
            open_files.watch(self)

    @classmethod
    def open(
        cls,
        index_dir: str | os.PathLike[str],
        slot_count: int,
        entry_count: int,
        now_ms: Callable[[], int],
        *,
        max_msgs_num_batch: int = DEFAULT_MAX_MSGS_NUM_BATCH,
        writable: bool = True,
        open_files: OpenFiles | None = None,
    ) -> IndexService:
        """Load every ``yyyyMMddHHmmssSSS`` file in name order (with ``open_files``, each mapped on
        first use); other names are not ours and are left alone.

        A ``.tmp`` left by a creation that was killed is removed. A file of the wrong size raises
        IndexFileError (the store was written with another geometry).
        """
        if entry_count < 2:
            # A new file must take at least one entry (#0 is never used), or rolling never ends.
            raise IndexFileError(f"entry_count must be at least 2, got {entry_count}")
        if max_msgs_num_batch < 1:
            raise ValueError(f"max_msgs_num_batch must be positive, got {max_msgs_num_batch}")
        path = Path(index_dir)
        if writable:
            make_dirs(path)
            remove_unfinished(path)
        files: list[IndexFile] = []
        try:
            for name in index_file_names(path):
                files.append(IndexFile.open(path / name, slot_count, entry_count, writable=writable,
                                            open_files=open_files))
        except BaseException:
            for opened in files:
                opened.close()
            raise
        service = cls(path, slot_count, entry_count, now_ms, max_msgs_num_batch, files, open_files)
        service._writable = writable
        return service

    def refresh(self) -> None:
        """For a read-only service in another process than the builder: map the files the builder
        created since, and forget the ones retention deleted."""
        names = index_file_names(self._index_dir)
        present = set(names)
        for f in [f for f in self._files if f.path.name not in present]:
            f.close()
            self._files.remove(f)
        known = {f.path.name for f in self._files}
        newest = self._files[-1].path.name if self._files else ""
        for name in names:
            if name not in known and name > newest:
                try:
                    self._files.append(IndexFile.open(self._index_dir / name, self._slot_count, self._entry_count,
                                                      writable=self._writable, open_files=self._open_files))
                except (OSError, IndexFileError):
                    break  # still being created (fallocate under way): pick it up next time

    def forget_gone(self) -> None:
        """Drop the leading files found deleted (retention deletes the oldest first): what ``refresh``
        does, told by the process's open files instead of a listing."""
        while self._files and self._files[0].held.gone:
            gone = self._files.pop(0)
            self._flushed_full.discard(gone.name)
            gone.close()

    @property
    def index_dir(self) -> Path:
        return self._index_dir

    @property
    def files(self) -> tuple[IndexFile, ...]:
        """Open files, oldest first."""
        return tuple(self._files)

    @property
    def last_file(self) -> IndexFile | None:
        return self._files[-1] if self._files else None

    @property
    def index_msg_ms(self) -> int:
        """End time of the newest full file this service has flushed; 0 if none.

        This is what the checkpoint's ``indexMsgTimestamp`` may be set to after a flush: files
        ending at or before it are durable and survive ``drop_newer_than`` on abnormal recovery.
        """
        return self._index_msg_ms

    # -- writing --------------------------------------------------------------------------------

    def build(
        self,
        topic: str,
        keys: Sequence[str],
        uniq_key: str | None,
        phys_offset: int,
        store_ms: int,
        sys_flag: int,
    ) -> None:
        """Index one dispatched record (``IndexService.buildIndex``): UNIQ_KEY, then each non-empty key.

        ``keys`` is the KEYS property already split on single spaces. The record goes through
        ``build_hashed``'s rules and puts as a batch of one: a caller with many records gives them to
        ``build_records`` at once.
        """
        self.build_records([(topic, keys, uniq_key, phys_offset, store_ms, sys_flag)])

    def build_records(self, records: Iterable[IndexedRecord]) -> None:
        """``build`` for many records, in commitlog order: every key hashed at once and put in one
        batch (the per-call cost of a put is paid once, not once a record)."""
        full_keys: list[str] = []
        phys_offsets: list[int] = []
        store_times: list[int] = []
        sys_flags: list[int] = []
        records = list(records)
        for topic, keys, uniq_key, phys_offset, store_ms, sys_flag in records:
            names = record_keys(uniq_key, keys)
            full_keys += [index_key(topic, key) for key in names]
            phys_offsets += [phys_offset] * len(names)
            store_times += [store_ms] * len(names)
            sys_flags += [sys_flag] * len(names)
        if records:  # a record without keys still opens the newest file, as RocketMQ's buildIndex does
            self._build(np.asarray(phys_offsets, np.int64), np.asarray(store_times, np.int64),
                        np.asarray(sys_flags, np.int64), np.asarray(index_hashes(full_keys), np.int64))

    def build_hashed(self, columns: np.ndarray[Any, Any], key_rows: np.ndarray[Any, Any],
                     key_hashes: np.ndarray[Any, Any]) -> None:
        """Index the records of ``DISPATCH_COLUMNS`` rows whose keys are already hashed (``key_hashes``,
        each of the record at ``key_rows``, a record's in ``build``'s order).

        A record below the newest file's end offset was indexed before and is skipped; a rolled-back
        transaction is never indexed. Creating a file may raise OSError (a full disk); it propagates
        unchanged.
        """
        # fancy indexing copies each column once, as the int64 arrays the kernel takes
        self._build(columns["phys_offset"][key_rows], columns["store_ms"][key_rows], columns["sys_flag"][key_rows],
                    key_hashes)

    def flush(self) -> int:
        """Flush the newest file and every full file not flushed yet; returns ``index_msg_ms``.

        A flush failure raises: the index on disk would otherwise be older than the checkpoint says.
        A read-only service has nothing to flush (and maps no file let go to find that out).
        """
        for index_file in self._files if self._writable else ():
            if index_file.name in self._flushed_full:
                continue
            self._flush_file(index_file)
        return self._index_msg_ms

    def close(self) -> None:
        """Flush (as RocketMQ's shutdown does) and unmap every file, even when a flush fails."""
        try:
            self.flush()
        finally:
            for index_file in self._files:
                index_file.close()
            self._files.clear()

    # -- reading --------------------------------------------------------------------------------

    def query(self, topic: str, key: str, max_count: int, begin_ms: int, end_ms: int, *,
              after: IndexCursor | None = None) -> QueryOffsetResult:
        """Offsets whose key hash matches ``topic#key`` in [begin_ms, end_ms] (``IndexService.queryOffset``).

        Newest file first, newest entry first within a file; at most ``min(max_count,
        max_msgs_num_batch)`` a page. Hash collisions are included and count toward that: the caller
        compares the records' keys, and asks for the next page (``after=result.next_page``) while it
        is short, so colliding keys never hide one that matches. Pages are cut by position in the
        chains, not by time, so none is skipped or repeated.
        """
        return self.query_many(topic, [key], max_count, begin_ms, end_ms, after=[after]).page(0)

    def query_many(self, topic: str, keys: Sequence[str], max_count: int | Sequence[int], begin_ms: int,
                   end_ms: int, *, after: Sequence[IndexCursor | None] | None = None) -> QueryPages:
        """``query`` for many keys of one topic at once, in their order (``max_count`` one for all, or
        one a key; ``after`` each key's cursor): each file probed for all the keys that walk it
        together (``mqstore.engine.keyindex.pages``)."""
        counts = [max_count] * len(keys) if isinstance(max_count, int) else max_count
        return select_pages(self._files[::-1], index_hashes([index_key(topic, key) for key in keys]),
                            [min(count, self._max_msgs_num_batch) for count in counts],
                            [None] * len(keys) if after is None else after, begin_ms, end_ms)

    @property
    def max_msgs_num_batch(self) -> int:
        """At most this many offsets a key a page (``query``) or a round (``probe``)."""
        return self._max_msgs_num_batch

    def probe(self, topic: str, keys: Sequence[str], begin_ms: int, end_ms: int) -> KeyProbe:
        """A walk of the files as they are now, for every key of ``topic`` at once, all hashed in one call:
        what a key query asks for candidates, a round at a time (``mqstore.engine.keyindex.probe``)."""
        return KeyProbe(self._files[::-1], java_key_hashes(topic, keys), begin_ms, end_ms)

    # -- deleting -------------------------------------------------------------------------------

    def delete_before(self, min_phys_offset: int) -> int:
        """Delete the oldest files whose entries all precede ``min_phys_offset``, never the newest.

        ``IndexService.deleteExpiredFile``, run after commitlog files were deleted. Returns the count.
        """
        doomed: list[IndexFile] = []
        for index_file in self._files[:-1]:
            if index_file.end_phys_offset >= min_phys_offset:
                break
            doomed.append(index_file)
        for index_file in doomed:
            self._delete(index_file)
        return len(doomed)

    def drop_newer_than(self, index_msg_ms: int) -> int:
        """Delete every file whose end time is after the checkpoint's ``indexMsgTimestamp``.

        ``IndexService.load(lastExitOK=false)``: such files may have lost writes that never reached
        disk; recovery re-dispatches their records. Returns the count.
        """
        doomed = [index_file for index_file in self._files if index_file.end_ms > index_msg_ms]
        for index_file in doomed:
            self._delete(index_file)
        return len(doomed)

    def truncate_after(self, phys_offset: int) -> int:
        """Forget every entry at or after ``phys_offset``; returns where re-dispatch must start.

        Files are deleted whole, newest first, while their end offset is >= ``phys_offset`` (offsets
        never decrease along the files, so this removes exactly the files holding such entries). The
        caller then re-dispatches every record at or after the returned offset:

        - the newest remaining file's ``end_phys_offset``: records below it are fully indexed and
          ``build`` skips them; the record exactly there is re-dispatched and ``build`` adds only
          its keys that are missing; everything after it was in the deleted files or never indexed;
        - with no file left, the ``begin_phys_offset`` of the oldest deleted file (no entry of any
          surviving file needs protecting, and nothing before it was in a deleted file);
        - with no file at all, 0 (the caller clamps it to the commitlog's min offset).
        """
        redispatch_from = 0
        while self._files and self._files[-1].end_phys_offset >= phys_offset:
            doomed = self._files[-1]
            redispatch_from = doomed.begin_phys_offset  # the last one assigned is the oldest deleted
            self._delete(doomed)
        if self._files:
            return self._files[-1].end_phys_offset
        return redispatch_from

    # -- internals ------------------------------------------------------------------------------

    def _build(self, phys_offsets: np.ndarray[Any, Any], store_times: np.ndarray[Any, Any],
               sys_flags: np.ndarray[Any, Any], key_hashes: np.ndarray[Any, Any]) -> None:
        """Put keys (one per position of the arrays, in commitlog order), but none of a record below
        the newest file's end offset, of a rolled-back transaction, or (at that end offset exactly)
        that the index already holds; rolls files as they fill."""
        end = self._last_writable_file().end_phys_offset
        wanted = (phys_offsets >= end) & ((sys_flags & TRANSACTION_TYPE_MASK) != TRANSACTION_ROLLBACK_TYPE)
        # RocketMQ re-indexes the record sitting exactly at endPhyOffset when it is re-dispatched,
        # duplicating its entries. Skipping the keys already reachable makes re-dispatch idempotent
        # and still completes a record whose keys were cut off by a kill mid-build. Decided for all
        # of the record's keys before any is put.
        at_end = (wanted & (phys_offsets == end)).nonzero()[0]  # not flatnonzero: its Python costs more
        if len(at_end):
            wanted[[i for i in at_end.tolist() if self._has_hashed_entry(int(key_hashes[i]), end)]] = False
        hashes = key_hashes
        if np.count_nonzero(wanted) < len(wanted):  # a round's keys are mostly all new: no copies then
            hashes, phys_offsets, store_times = key_hashes[wanted], phys_offsets[wanted], store_times[wanted]
        done = 0
        while done < len(hashes):
            last = self._last_writable_file()
            put = last.put_keys(hashes[done:], phys_offsets[done:], store_times[done:])
            if put == 0:
                if last.index_count <= 1:
                    raise IndexFileError(f"new index file {last.name} refused its first key")
                self._roll()
            done += put

    def _last_writable_file(self) -> IndexFile:
        last = self.last_file
        if last is None or last.is_full:
            return self._roll()
        return last

    def _roll(self) -> IndexFile:
        """``getAndCreateLastIndexFile``: a new file seeded from the full one, which is then flushed."""
        previous = self.last_file
        name = next_index_file_name(self._index_dir, self._now_ms(), "" if previous is None else previous.name)
        new_file = IndexFile.create(
            self._index_dir / name,
            self._slot_count,
            self._entry_count,
            begin_phys_offset=0 if previous is None else previous.end_phys_offset,
            begin_ms=0 if previous is None else previous.end_ms,
            open_files=self._open_files,
        )
        self._files.append(new_file)
        if previous is not None:
            # RocketMQ does this on a background thread; the engine starts no threads.
            self._flush_file(previous)
        return new_file

    def _flush_file(self, index_file: IndexFile) -> None:
        is_full = index_file.is_full
        index_file.flush()
        if is_full:
            self._flushed_full.add(index_file.name)
            self._index_msg_ms = index_file.end_ms

    def _has_hashed_entry(self, key_hash: int, phys_offset: int) -> bool:
        # Only files ending exactly at the offset can hold it: the newest, and before it a full
        # file the record's first keys went into just before a roll.
        for index_file in reversed(self._files):
            if index_file.end_phys_offset != phys_offset:
                return False
            if index_file.has_hashed_entry(key_hash, phys_offset):
                return True
        return False

    def _delete(self, index_file: IndexFile) -> None:
        self._files.remove(index_file)
        self._flushed_full.discard(index_file.name)
        index_file.delete()
