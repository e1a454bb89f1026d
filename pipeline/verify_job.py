"""``verify``: ``mqstore.engine.repair.verify.verify_store``'s checks as a Spark job, with the same findings.

The driver reads what is small (geometry, which queue and index files open, index headers) and plans
record-aligned commitlog ranges. Then, in parallel:

1. one task per commitlog range (``verify_tasks.check_range``): record CRCs, index keys, the index
   entries whose phys offset falls in the range's share of the offset line;
2. the ranges' per-queue record facts, shuffled so that one task gets all of a queue's records in
   commitlog order (``verify_tasks.check_queue``): missing and mismatched consume-queue entries.

Runs of missing index keys that a range boundary cut are joined on the driver, which sorts every
finding into one report: ``mqstore.engine.repair.verify.VerifyReport``, so the two verifiers can be compared whole.
Nothing is written to the store.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from pyspark import StorageLevel

from mqstore.engine.config import Geometry
from mqstore.engine.delay.table import read_delay_levels
from mqstore.engine.keyindex.index_file import (
    INDEX_ENTRY_DTYPE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    IndexFileError,
)
from mqstore.engine.log.mapped_file import MappedFileError
from mqstore.engine.meta.topics import deleted_topics
from mqstore.engine.read.store_files import IndexHeader, QueueEntries, index_paths, queue_ids, read_geometry
from mqstore.engine.repair.verify import Finding, VerifyReport, cq_scope
from mqstore.pipeline.commitlog_ranges import DEFAULT_SPLIT_BYTES, CommitlogRange, commitlog_files, plan_ranges
from mqstore.pipeline.finding_runs import merge_runs
from mqstore.pipeline.queue_chunks import EMPTY_ROWS, ChunkKey, QueueKey, by_queue
from mqstore.pipeline.verify_tasks import (
    IndexFileInfo,
    RangeOutcome,
    RangeTask,
    VerifyPlan,
    check_queues,
    check_range,
)

# the order of mqstore.engine.repair.verify's docstring, for a report that reads the same way
KINDS = ("file_unreadable", "record_corrupt", "cq_entry_mismatch", "cq_entry_missing", "index_entry_unresolved",
         "index_entry_missing")


def verify(spark: Any, store_dir: Path | str, *, split_bytes: int = DEFAULT_SPLIT_BYTES) -> VerifyReport:
    """Check every derived file of the store at ``store_dir`` against its commitlog, on Spark.
    Raises FileNotFoundError for a missing store."""
    store_dir = Path(store_dir).resolve()
    if not store_dir.is_dir():
        raise FileNotFoundError(f"no store directory at {store_dir}")
    sc = spark.sparkContext
    geometry = read_geometry(store_dir)
    findings: list[Finding] = []
    queues = _readable_queues(store_dir, geometry, findings)
    headers = _index_headers(store_dir, geometry, findings)
    files = commitlog_files(store_dir, geometry)
    ranges = plan_ranges(sc, files, split_bytes)
    with_entries = [h for h in headers if h.index_count > 1]
    infos = sc.parallelize(with_entries, max(len(with_entries), 1)).map(partial(_index_info, geometry=geometry)) \
        .collect() if with_entries else []
    plan = VerifyPlan(str(store_dir), geometry, files[0].file_base if files else 0,
                      headers[0].begin_phys_offset if headers else -1, tuple(infos), frozenset(queues),
                      read_delay_levels(Path(store_dir)).text, deleted_topics(store_dir))

    outcomes = sc.parallelize(_tasks(ranges), max(len(ranges), 1)).map(partial(check_range, plan=plan)) \
        .persist(StorageLevel.MEMORY_AND_DISK)
    try:
        summaries = outcomes.map(lambda o: (o.records, o.findings, o.key_runs, sorted(o.queue_rows))).collect()
        queue_keys = sorted(set(queues).union(*(keys for *_, keys in summaries)))
        queue_outcomes = _check_queues(sc, outcomes, queues, plan, len(queue_keys)) if queue_keys else []
    finally:
        outcomes.unpersist()

    records = sum(records for records, *_ in summaries)
    for _, range_findings, _, _ in summaries:
        findings.extend(range_findings)
    runs = merge_runs(run for _, _, key_runs, _ in summaries for run in key_runs)
    findings.extend(run.finding("index_entry_missing", "phys offset") for run in runs)
    for outcome in queue_outcomes:
        findings.extend(outcome.findings)
    return VerifyReport(sorted(findings, key=finding_order), records, sum(o.cq_entries for o in queue_outcomes),
                        sum(max(h.index_count - 1, 0) for h in headers))


def finding_order(finding: Finding) -> tuple[Any, ...]:
    """Kind as the engine lists them, then the location with its numbers compared as numbers."""
    parts = re.split(r"(\d+)", finding.location)
    return (KINDS.index(finding.kind) if finding.kind in KINDS else len(KINDS), finding.kind,
            [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts])


def _readable_queues(store_dir: Path, geometry: Geometry, findings: list[Finding]) -> list[QueueKey]:
    readable: list[QueueKey] = []
    for topic, queue_id in queue_ids(store_dir):
        try:
            QueueEntries.open(store_dir, topic, queue_id, geometry.cq_entries_per_file)
        except MappedFileError as exc:
            findings.append(Finding("file_unreadable", cq_scope(topic, queue_id), str(exc)))
        else:
            readable.append((topic, queue_id))
    return readable


def _index_headers(store_dir: Path, geometry: Geometry, findings: list[Finding]) -> list[IndexHeader]:
    headers: list[IndexHeader] = []
    for path in index_paths(store_dir):
        try:
            headers.append(IndexHeader.read(path, geometry))
        except IndexFileError as exc:
            findings.append(Finding("file_unreadable", f"index/{path.name}", str(exc)))
    return headers


def _index_info(header: IndexHeader, geometry: Geometry) -> IndexFileInfo:
    """A header plus what one sequential read of the entries' phys offsets tells: whether they are in
    order (tasks then binary-search their share) and their span."""
    entries_pos = INDEX_HEADER_SIZE + geometry.index_slot_count * INDEX_SLOT_SIZE + INDEX_ENTRY_SIZE
    count = header.index_count - 1
    phys = np.memmap(header.path, dtype=INDEX_ENTRY_DTYPE, mode="r", offset=entries_pos, shape=(count,)
                     )["phys_offset"].astype(np.int64)
    ordered = not bool((phys[1:] < phys[:-1]).any())
    return IndexFileInfo(str(header.path), header.begin_phys_offset, header.end_phys_offset, count, ordered,
                         int(phys.min()), int(phys.max()))


def _tasks(ranges: list[CommitlogRange]) -> list[RangeTask]:
    """Each range owns the index entries from its start to the next range's; the first and the last
    stretch to the ends of the offset line."""
    return [RangeTask(r, None if n == 0 else r.start, None if n == len(ranges) - 1 else ranges[n + 1].start)
            for n, r in enumerate(ranges)]


def _check_queues(sc: Any, outcomes: Any, queues: list[QueueKey], plan: VerifyPlan, queue_count: int) -> list[Any]:
    chunks = outcomes.flatMap(_queue_chunks)
    # every readable queue gets its pass, also one whose records are all gone
    chunks = chunks.union(sc.parallelize([((key, -1), EMPTY_ROWS) for key in queues], 1))
    return list(by_queue(chunks, queue_count, sc.defaultParallelism).mapPartitions(partial(check_queues, plan=plan))
                .collect())


def _queue_chunks(outcome: RangeOutcome) -> list[tuple[ChunkKey, Any]]:
    return [((key, int(rows["phys_offset"][0])), rows) for key, rows in outcome.queue_rows.items()]
