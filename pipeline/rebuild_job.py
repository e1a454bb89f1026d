"""``rebuild``: a stopped store's consume queues and index files made again from its commitlog, on
Spark, byte for byte what ``mqstore.engine.repair.rebuild.rebuild_derived`` makes.

1. The store lock (the engine's flock on ``{store}/lock``) is held for the whole job: a running broker
   holds it, and the job refuses.
2. Every commitlog range is decoded by a task, CRCs checked, and kept (``persist``). The index is one
   chain structure across files, so the driver builds it with ``IndexService.build`` from every
   record in commitlog order: ranges reach it one at a time, in order, while the next ones decode
   (one Spark job per range, a few ahead), into a staging directory beside ``index/``.
3. Damage anywhere in the commitlog stops the job before the store changes: this job makes derived
   files, and cutting a damaged commitlog is the engine's recovery's call.
4. The abort marker goes in (a kill from here on makes the next open recover abnormally, as a kill
   in the engine's rebuild does); ``consumequeue/`` and the index files are deleted; the staged
   index files are renamed into ``index/``.
5. Consume queues: each range's entries, grouped by (topic, queue id), go through a Spark shuffle
   that brings all of a queue's chunks to one task in commitlog order, and that task writes the
   queue's files with ``ConsumeQueue.append``, the engine's own writer.
6. Everything flushed, the checkpoint is written (unchanged, as the engine's close writes it) and the
   abort marker removed: the next ``MessageStore.open`` recovers normally.

Each record is dispatched as ``mqstore.engine.repair.recovery.redispatch`` dispatches it: its entry carries the
record's own fields (``DispatchRequest.from_record``), its index keys the offset where it lies.
Index file names come from the clock, so only their contents, in name order, match the engine's.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict, deque
from collections.abc import Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy.typing as npt
from pyspark import StorageLevel

from mqstore.engine.batch.dispatch import DispatchRequest
from mqstore.engine.config import Geometry
from mqstore.engine.consumequeue.consume_queue import ConsumeQueue
from mqstore.engine.delay.table import parse_delay_levels, read_delay_levels
from mqstore.engine.errors import MqstoreError
from mqstore.engine.keyindex.file_names import INDEX_FILE_NAME
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.record import DecodeKind
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.engine.meta.metafile import create_abort, fsync_dir, remove_abort
from mqstore.engine.meta.store_lock import lock_store  # the engine's own lock: a broker and this job exclude each other
from mqstore.engine.meta.topics import deleted_topics
from mqstore.engine.read.store_files import index_paths, read_geometry
from mqstore.engine.repair.rebuild import RebuildResult
from mqstore.engine.store import wall_clock_ms
from mqstore.pipeline.commitlog_ranges import (
    DEFAULT_SPLIT_BYTES,
    CommitlogRange,
    commitlog_files,
    plan_ranges,
    walk_range,
)
from mqstore.pipeline.queue_chunks import ChunkKey, QueueKey, by_queue, queue_groups, queue_rows

Array = npt.NDArray[Any]
IndexRow = tuple[str, tuple[str, ...], str | None, int, int, int]  # topic, keys, uniq key, phys, store ms, sys flag
DAMAGE_SHOWN = 5
MAX_RANGES_RUNNING = 4
STAGING_INDEX_DIR = "index.rebuilding"  # in the store: renames into index/ stay on one filesystem
INDEX_BATCH_RECORDS = 65_536  # records hashed and put in one go: bounded arrays, the per-call cost spread


class DamagedCommitLogError(MqstoreError, RuntimeError):
    """The commitlog has records that fail their checks: not this job's to cut."""


@dataclass(frozen=True, slots=True)
class RangeSummary:
    start: int                          # where the range's walk started
    records: int
    end_phys: int                       # one past the range's last record (start when none)
    damage: list[tuple[int, str]]       # (phys offset, what is wrong), the first DAMAGE_SHOWN
    damage_count: int
    queues: list[QueueKey]


@dataclass(frozen=True, slots=True)
class DecodedRange:
    summary: RangeSummary
    entries: dict[QueueKey, Array]  # QUEUE_ROW_DTYPE per queue in commitlog order, with queue offsets
    index_rows: list[IndexRow]      # every record, in commitlog order


def rebuild(spark: Any, store_dir: Path | str, *, split_bytes: int = DEFAULT_SPLIT_BYTES) -> RebuildResult:
    """Recreate ``consumequeue/`` and ``index/`` of the stopped store at ``store_dir``. Raises
    StoreLockedError when a process holds the store, DamagedCommitLogError (the store untouched) when
    records fail their checks, FileNotFoundError when there is no store."""
    store_dir = Path(store_dir).resolve()
    if not (store_dir / "commitlog").is_dir():
        raise FileNotFoundError(f"no store at {store_dir} (it has no commitlog directory)")
    lock_fd = lock_store(store_dir)
    try:
        return _rebuild_locked(spark.sparkContext, store_dir, split_bytes)
    finally:
        os.close(lock_fd)


def _rebuild_locked(sc: Any, store_dir: Path, split_bytes: int) -> RebuildResult:
    geometry = read_geometry(store_dir)
    ranges = plan_ranges(sc, commitlog_files(store_dir, geometry), split_bytes)
    decoded = sc.parallelize(ranges, max(len(ranges), 1)) \
        .map(partial(decode_range, require_prop_crc=geometry.prop_crc,
                     message_delay_level=read_delay_levels(store_dir).text,
                     deleted=deleted_topics(store_dir))).persist(StorageLevel.MEMORY_AND_DISK)
    staging = store_dir / STAGING_INDEX_DIR
    try:
        _remove_tree(staging)  # what a killed rebuild left
        summaries = _index_into(staging, sc, decoded, len(ranges), geometry)
        create_abort(store_dir, os.getpid())
        _delete_derived(store_dir)
        _install_index(staging, store_dir / "index")
        _queue_job(sc, decoded, store_dir, geometry, len(set().union(*(s.queues for s in summaries))))
        fsync_dir(store_dir / "consumequeue")
    finally:
        decoded.unpersist()
        _remove_tree(staging)
    with Checkpoint.open(store_dir / "checkpoint") as checkpoint:
        checkpoint.flush()
    remove_abort(store_dir)
    first = ranges[0].start if ranges else 0
    return RebuildResult(sum(s.records for s in summaries), first, max((s.end_phys for s in summaries), default=first))


def _index_into(staging: Path, sc: Any, decoded: Any, range_count: int, geometry: Geometry) -> list[RangeSummary]:
    """Build the index under ``staging`` from every range, in commitlog order; each range's summary.
    Raises DamagedCommitLogError at the first range with damage."""
    index = IndexService.open(staging, geometry.index_slot_count, geometry.index_entry_count, wall_clock_ms)
    summaries: list[RangeSummary] = []
    ranges = _in_order(sc, decoded, range_count)
    try:
        last_phys = -1
        for summary, rows in ranges:
            if summary.damage_count:
                _refuse(summary)
            summaries.append(summary)
            for row in rows:
                if row[3] <= last_phys:
                    raise RuntimeError(f"records reached the index out of commitlog order ({row[3]} after {last_phys})")
                last_phys = row[3]
            for first in range(0, len(rows), INDEX_BATCH_RECORDS):  # a range's keys hashed and put at once
                index.build_records(rows[first:first + INDEX_BATCH_RECORDS])
    finally:
        ranges.close()  # now, not when the traceback lets go: range jobs still running are waited for
        index.close()  # flushes every file
    return summaries


def _in_order(sc: Any, decoded: Any, range_count: int
              ) -> Generator[tuple[RangeSummary, list[IndexRow]], None, None]:
    """Each range's summary and index rows, in commitlog order: one Spark job per range, a few
    running at once (one thread each submits them in order) and as many again done and waiting.
    Decoding overlaps the index build, and the driver holds a bounded number of ranges' rows
    (``toLocalIterator`` would decode one range at a time). The single-threaded index build sets the
    pace, so more ranges ahead than that would cost driver memory and gain nothing."""
    running = max(1, min(sc.defaultParallelism, MAX_RANGES_RUNNING))
    pool = ThreadPoolExecutor(running, thread_name_prefix="mqstore-rebuild")
    pending: deque[Future[list[tuple[RangeSummary, list[IndexRow]]]]] = deque()
    try:
        for k in range(range_count):
            pending.append(pool.submit(sc.runJob, decoded, _summary_and_rows, [k]))
            if len(pending) > 2 * running:
                yield pending.popleft().result()[0]
        while pending:
            yield pending.popleft().result()[0]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _refuse(summary: RangeSummary) -> None:
    listed = "; ".join(f"phys offset {phys}: {reason}" for phys, reason in summary.damage)
    raise DamagedCommitLogError(
        f"{summary.damage_count} damaged record(s) in the commitlog range from phys offset {summary.start} "
        f"({listed}); the store was not changed. This job rebuilds derived files from a sound commitlog only: "
        f"'mqstore verify' lists all the damage; the engine's rebuild ('mqstore verify --repair') first recovers "
        f"the store, which cuts the commitlog at the first bad record its recovery checks.")


def _delete_derived(store_dir: Path) -> None:
    """Every consume-queue and index file, before anything opens them: a damaged one (of the wrong
    size, say) would stop the index service from opening."""
    cq_root = store_dir / "consumequeue"
    if cq_root.exists():
        shutil.rmtree(cq_root)
    cq_root.mkdir()
    for path in index_paths(store_dir):
        path.unlink()
    fsync_dir(store_dir)


def _install_index(staging: Path, index_dir: Path) -> None:
    index_dir.mkdir(exist_ok=True)
    for path in sorted(p for p in staging.iterdir() if INDEX_FILE_NAME.fullmatch(p.name)):
        os.rename(path, index_dir / path.name)
    fsync_dir(index_dir)


def _remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


def _queue_job(sc: Any, decoded: Any, store_dir: Path, geometry: Geometry, queue_count: int) -> None:
    if queue_count:
        by_queue(decoded.flatMap(_entry_chunks), queue_count, sc.defaultParallelism) \
            .foreachPartition(partial(write_queues, store_dir=str(store_dir),
                                      entries_per_file=geometry.cq_entries_per_file))


# -- executor side ---------------------------------------------------------------------------------


def decode_range(r: CommitlogRange, *, require_prop_crc: bool, message_delay_level: str,
                 deleted: dict[str, int] | None = None) -> DecodedRange:
    """``deleted``: topic -> the commitlog end at its deletion (``deletedTopics``); its records below
    that end get no queue entry, as ``redispatch`` gives them none."""
    deleted = deleted or {}
    entries: dict[QueueKey, list[tuple[int, int, int, int]]] = defaultdict(list)
    index_rows: list[IndexRow] = []
    damage: list[tuple[int, str]] = []
    damage_count = records = 0
    end_phys = r.start
    for phys, decoded, record in walk_range(r, require_prop_crc=require_prop_crc):
        if decoded.kind is DecodeKind.BLANK:
            continue
        if decoded.kind is not DecodeKind.RECORD or record is None:
            damage_count += 1
            if len(damage) < DAMAGE_SHOWN:
                damage.append((phys, f"{decoded.kind.value}: {decoded.reason}"))
            continue
        records += 1
        end_phys = phys + decoded.size
        request = DispatchRequest.from_record(record, parse_delay_levels(message_delay_level))
        if request.has_queue_entry and phys >= deleted.get(request.topic, 0):
            entries[(request.topic, request.queue_id)].append(
                (request.queue_offset, request.phys_offset, request.size, request.tags_code))
        index_rows.append((request.topic, request.keys, request.uniq_key, phys, request.store_ms, request.sys_flag))
    summary = RangeSummary(r.start, records, end_phys, damage, damage_count, sorted(entries))
    return DecodedRange(summary, {key: queue_rows(rows) for key, rows in entries.items()}, index_rows)


def _entry_chunks(d: DecodedRange) -> list[tuple[ChunkKey, Array]]:
    return [((key, d.summary.start), rows) for key, rows in d.entries.items()]


def _summary_and_rows(decoded: Iterable[DecodedRange]) -> list[tuple[RangeSummary, list[IndexRow]]]:
    return [(d.summary, d.index_rows) for d in decoded]


def write_queues(items: Iterable[tuple[ChunkKey, Array]], store_dir: str, entries_per_file: int) -> None:
    """Write every queue of a partition of ``queue_chunks.by_queue``. A queue belongs to this task
    alone; what a failed attempt of it left is deleted first."""
    root = Path(store_dir) / "consumequeue"
    for (topic, queue_id), rows in queue_groups(items):
        queue_dir = root / topic / str(queue_id)
        if queue_dir.exists():
            shutil.rmtree(queue_dir)
        cq = ConsumeQueue.open(root, topic, queue_id, entries_per_file)
        try:
            for queue_offset, phys_offset, size, tags_code in rows.tolist():
                cq.append(queue_offset, phys_offset, size, tags_code)
            cq.queue.flush_all()
        finally:
            cq.close()
        fsync_dir(queue_dir)
        fsync_dir(queue_dir.parent)
