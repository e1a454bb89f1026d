"""The executor side of the Spark verify: ``mqstore.engine.repair.verify``'s checks, cut along two axes.

``check_range`` walks one commitlog range: every record's CRCs, its index keys against the entries of
the index files that cover it, and then every index entry whose phys offset falls in the range's
share of the offset line that no record claimed. It hands on each record's consume-queue facts,
grouped by queue. ``check_queue`` gets all of one queue's records (Spark groups them, in commitlog
order) and compares them with the queue's files, vectorised: a record without its entry, then every
entry that no record confirmed.

The rules, and the words of every finding, are ``mqstore.engine.repair.verify``'s (the tests compare the two
verifiers finding by finding); runs of missing entries are carried as ``finding_runs.Run``s so that
runs a range boundary cut join up again on the driver.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine.batch.dispatch import DispatchRequest
from mqstore.engine.config import Geometry
from mqstore.engine.consumequeue.entry import CQ_DTYPE, entry_holds_message
from mqstore.engine.delay.table import parse_delay_levels
from mqstore.engine.keyindex.index_file import INDEX_ENTRY_DTYPE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from mqstore.engine.keyindex.keys import index_hash, index_key
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import SYSFLAG_TX_MASK, SYSFLAG_TX_ROLLBACK, DecodeKind
from mqstore.engine.read.store_files import QueueEntries
from mqstore.engine.repair.verify import Finding, IndexClaims, check_queue_entries, cq_scope
from mqstore.pipeline.commitlog_ranges import CommitlogRange, walk_range
from mqstore.pipeline.finding_runs import Run, RunCollector
from mqstore.pipeline.queue_chunks import ChunkKey, QueueKey, queue_groups, queue_rows

Array = npt.NDArray[Any]


@dataclass(frozen=True, slots=True)
class IndexFileInfo:
    path: str
    begin_phys_offset: int
    end_phys_offset: int
    entry_count: int   # entries 1 .. entry_count are in use
    ordered: bool      # phys offsets never decrease along the entries: only damage breaks this
    min_entry_phys: int
    max_entry_phys: int

    @property
    def name(self) -> str:
        return Path(self.path).name


@dataclass(frozen=True, slots=True)
class VerifyPlan:
    """What every task needs, read once by the driver."""

    store_dir: str
    geometry: Geometry
    min_phys_offset: int
    index_floor: int                   # the oldest index file's begin offset; -1 without index files
    index_files: tuple[IndexFileInfo, ...]
    queues: frozenset[QueueKey]        # the readable consume queues; the others count as absent
    message_delay_level: str           # the store's delay table (mqstore.engine.delay.table)
    deleted: dict[str, int]            # deleted topic -> commitlog end at deletion (``deletedTopics``)


@dataclass(frozen=True, slots=True)
class RangeTask:
    range: CommitlogRange
    # index entries with a phys offset in [own_from, own_to) are this task's to account for; the
    # first and last tasks stretch to the ends of the line, so every entry has exactly one owner
    own_from: int | None
    own_to: int | None


@dataclass(frozen=True, slots=True)
class RangeOutcome:
    records: int
    findings: list[Finding]
    key_runs: list[Run]              # index_entry_missing
    # QUEUE_ROW_DTYPE per queue, in commitlog order; phys_offset is where the walk found the record
    queue_rows: dict[QueueKey, Array]


@dataclass(frozen=True, slots=True)
class QueueOutcome:
    findings: list[Finding]
    cq_entries: int


def record_keys(keys: Iterable[str], uniq_key: str | None) -> list[str]:
    """What ``IndexService.build`` indexes for a record: UNIQ_KEY, then each non-empty KEYS token."""
    return ([uniq_key] if uniq_key else []) + [key for key in keys if key]


def open_commitlog(plan: VerifyPlan) -> CommitLog:
    return CommitLog.open(Path(plan.store_dir) / "commitlog", plan.geometry.commitlog_file_size, writable=False)


# -- one commitlog range ---------------------------------------------------------------------------


class _IndexShare(IndexClaims):
    """The entries of one index file that a range owns, sorted by phys offset as the engine's check
    sorts them (stably), and which of them a record claimed."""

    def __init__(self, info: IndexFileInfo, task: RangeTask, geometry: Geometry) -> None:
        self.info = info
        entries_pos = INDEX_HEADER_SIZE + geometry.index_slot_count * INDEX_SLOT_SIZE + INDEX_ENTRY_SIZE
        mapped = np.memmap(info.path, dtype=INDEX_ENTRY_DTYPE, mode="r", offset=entries_pos,
                           shape=(info.entry_count,))
        phys = mapped["phys_offset"]
        if info.ordered:  # two binary searches on the map: only the share's pages are read
            lo = 0 if task.own_from is None else bisect.bisect_left(phys, task.own_from)
            hi = len(phys) if task.own_to is None else bisect.bisect_left(phys, task.own_to)
            numbers = np.arange(lo, hi)
        else:
            native = phys.astype(np.int64)
            mine = np.ones(len(native), dtype=bool)
            if task.own_from is not None:
                mine &= native >= task.own_from
            if task.own_to is not None:
                mine &= native < task.own_to
            numbers = np.flatnonzero(mine)
            numbers = numbers[np.argsort(native[numbers], kind="stable")]
        super().__init__(numbers, phys[numbers].astype(np.int64), mapped["key_hash"][numbers].astype(np.int64))

    def covers(self, phys_offset: int) -> bool:
        return self.info.begin_phys_offset <= phys_offset <= self.info.end_phys_offset


def _shares(plan: VerifyPlan, task: RangeTask) -> list[_IndexShare]:
    """Index files that cover a record of the range or hold an entry it owns, in name order."""
    lo = task.own_from if task.own_from is not None else -(1 << 63)
    hi = task.own_to if task.own_to is not None else 1 << 63
    wanted = [info for info in plan.index_files
              if (info.begin_phys_offset < task.range.stop and info.end_phys_offset >= task.range.start)
              or not info.ordered or (info.min_entry_phys < hi and info.max_entry_phys >= lo)]
    return [_IndexShare(info, task, plan.geometry) for info in wanted]


def check_range(task: RangeTask, plan: VerifyPlan) -> RangeOutcome:
    findings: list[Finding] = []
    key_runs = RunCollector()
    rows: dict[QueueKey, list[tuple[int, int, int, int]]] = defaultdict(list)
    shares = _shares(plan, task)
    records = 0
    for phys, decoded, record in walk_range(task.range, require_prop_crc=plan.geometry.prop_crc):
        if decoded.kind is DecodeKind.BLANK:
            continue
        if decoded.kind is not DecodeKind.RECORD:
            findings.append(Finding("record_corrupt", f"commitlog phys offset {phys}",
                                    f"{decoded.kind.value}: {decoded.reason}"))
        if record is None:
            continue
        records += 1
        if record.phys_offset != phys:
            findings.append(Finding("record_corrupt", f"commitlog phys offset {phys}",
                                    f"its PHYSICALOFFSET field says {record.phys_offset}"))
        request = DispatchRequest.from_record(record, parse_delay_levels(plan.message_delay_level))
        if request.has_queue_entry and phys >= plan.deleted.get(request.topic, 0):
            rows[(request.topic, request.queue_id)].append((request.queue_offset, phys, request.size,
                                                            request.tags_code))
        if 0 <= plan.index_floor <= phys and request.sys_flag & SYSFLAG_TX_MASK != SYSFLAG_TX_ROLLBACK:
            _check_keys(phys, request, shares, key_runs)
    with _CommitLogReader(plan) as commitlog:
        for share in shares:
            for entry_no, entry_phys, key_hash in share.unclaimed():
                if 0 <= entry_phys < plan.min_phys_offset:
                    continue  # the record went with retention; the index file goes later
                problem = index_entry_problem(commitlog.get(), entry_phys, key_hash)
                if problem:
                    findings.append(Finding("index_entry_unresolved", f"index/{share.info.name} entry {entry_no}",
                                            problem))
    return RangeOutcome(records, findings, key_runs.close(),
                        {key: queue_rows(r) for key, r in rows.items()})


def _check_keys(phys: int, request: DispatchRequest, shares: list[_IndexShare], runs: RunCollector) -> None:
    keys = record_keys(request.keys, request.uniq_key)
    key_hashes = [index_hash(index_key(request.topic, key)) for key in keys]
    found = [False] * len(keys)
    for share in shares:
        if share.covers(phys):
            share.claim(phys, key_hashes, found)
    # A key given twice has one entry per copy, but one entry is enough to find it.
    found_hashes = {h for h, ok in zip(key_hashes, found, strict=True) if ok}
    missing = [k for k, h, ok in zip(keys, key_hashes, found, strict=True) if not ok and h not in found_hashes]
    if missing:
        runs.add("commitlog", phys, phys + request.size,
                 f"keys {missing} of topic {request.topic} are not in the index")


class _CommitLogReader:
    """The whole commitlog mapped read-only on first use: entries may point anywhere in it."""

    def __init__(self, plan: VerifyPlan) -> None:
        self.plan = plan
        self.commitlog: CommitLog | None = None

    def get(self) -> CommitLog:
        if self.commitlog is None:
            self.commitlog = open_commitlog(self.plan)
        return self.commitlog

    def __enter__(self) -> _CommitLogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.commitlog is not None:
            self.commitlog.close()


def index_entry_problem(commitlog: CommitLog, phys: int, key_hash: int) -> str:
    decoded = commitlog.read_record(phys, check_crc=False, read_body=False)
    record = decoded.record
    if record is None or record.phys_offset != phys:
        return f"no record starts at commitlog phys offset {phys} ({decoded.reason or 'another record is'})"
    if key_hash not in {index_hash(index_key(record.topic, k)) for k in record_keys(record.keys, record.uniq_key)}:
        return f"hash {key_hash} is none of the keys of the record at {phys} (topic {record.topic})"
    return ""


# -- one consume queue -----------------------------------------------------------------------------


def check_queues(items: Iterable[tuple[ChunkKey, Array]], plan: VerifyPlan) -> Iterator[QueueOutcome]:
    """A partition of ``queue_chunks.by_queue``: one outcome per queue."""
    with _CommitLogReader(plan) as commitlog:
        for key, rows in queue_groups(items):
            yield check_queue(key, rows, plan, commitlog)


def check_queue(key: QueueKey, rows: Array, plan: VerifyPlan, commitlog: _CommitLogReader) -> QueueOutcome:
    topic, queue_id = key
    scope = cq_scope(topic, queue_id)
    findings: list[Finding] = []
    q = QueueEntries.open(Path(plan.store_dir), topic, queue_id, plan.geometry.cq_entries_per_file) \
        if key in plan.queues else None
    entries = np.concatenate(q.files) if q is not None and q.files else np.zeros(0, dtype=CQ_DTYPE)
    first = q.first_queue_offset if q is not None else 0
    end = q.end_queue_offset if q is not None else 0
    claimed = np.zeros(max(end - first, 0), dtype=bool)
    # a record's entry: at its queue offset, valid, not a filler, pointing at it
    at = rows["queue_offset"] - first
    inside = (rows["queue_offset"] >= first) & (rows["queue_offset"] < end)
    entry = entries[np.where(inside, at, 0)] if len(entries) else np.zeros(len(rows), dtype=CQ_DTYPE)
    hit = inside & entry_holds_message(entry["phys_offset"], entry["size"]) \
        & (entry["phys_offset"] == rows["phys_offset"])
    confirmed = hit & (entry["size"] == rows["size"]) & (entry["tags_code"] == rows["tags_code"])
    claimed[at[confirmed]] = True  # an entry with another size or tags code: the queue pass reports it
    runs = RunCollector()
    for qo, phys in zip(rows["queue_offset"][~hit].tolist(), rows["phys_offset"][~hit].tolist(), strict=True):
        runs.add(scope, qo, qo + 1, f"record at commitlog phys offset {phys} has no entry")
    findings.extend(run.finding("cq_entry_missing", "queue offset") for run in runs.close())
    if q is None:
        return QueueOutcome(findings, 0)
    cq_entries = _check_entries(q, claimed, plan, commitlog, findings)
    return QueueOutcome(findings, cq_entries)


def _check_entries(q: QueueEntries, claimed: Array, plan: VerifyPlan, commitlog: _CommitLogReader,
                   findings: list[Finding]) -> int:
    return check_queue_entries(q, claimed, plan.min_phys_offset, commitlog.get, findings,
                               parse_delay_levels(plan.message_delay_level))
