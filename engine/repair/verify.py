"""Store verification: the consume queues and index files checked against the commitlog, read-only.

``verify_store`` reads the store's files without writing a byte (no lock, no abort marker, no
recovery) and walks the commitlog once, checking every record's CRCs and, on the way, the record's
consume-queue entry and index entries. Consume-queue and index entries that no record confirmed
are then decoded one by one to say what is wrong with them. Kinds of findings:

    record_corrupt          a record fails a CRC or a length check, or bytes follow the last record
    cq_entry_mismatch       an entry whose record is missing, or differs in size, topic, queue id,
                            queue offset or tags code
    cq_entry_missing        a record that gets a queue entry (not a prepared or rolled-back
                            transaction, nor a record of a topic deleted after it: ``deletedTopics``
                            in ``mqstore.engine.meta.topics``) absent from its consume queue
    index_entry_unresolved  an index entry not at a record start, or whose hash is none of that
                            record's ``topic#key`` hashes (KEYS tokens and UNIQ_KEY)
    index_entry_missing     a key of a record at or after the oldest index file's begin offset
                            (older files may have gone with retention) absent from the index
    file_unreadable         a consume-queue or index file of the wrong size or out of sequence
    timer_*                 the timer files (``mqstore.engine.timer.verify``): a timerlog record whose commitlog
                            record is not its rmq_sys_wheel_timer message, bytes after the log's last record

Entries pointing below the commitlog's min offset (retention deleted the record, the derived file
goes later) and filler entries below a queue's min offset are not findings. Runs of missing entries
at consecutive positions are reported as one finding each.

``repair=True`` rebuilds the derived files from the commitlog (``mqstore.engine.repair.rebuild``), then verifies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine.batch.dispatch import DispatchRequest
from mqstore.engine.config import Geometry
from mqstore.engine.consumequeue.entry import FILLER_SIZE, entry_valid
from mqstore.engine.delay.table import DelayLevels, read_delay_levels
from mqstore.engine.keyindex.index_file import (
    INDEX_ENTRY_DTYPE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    IndexFileError,
)
from mqstore.engine.keyindex.keys import index_hash, index_key, record_keys
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import MappedFileError
from mqstore.engine.log.record import SYSFLAG_TX_MASK, SYSFLAG_TX_ROLLBACK, DecodeKind, Record
from mqstore.engine.meta.topics import deleted_topics
from mqstore.engine.read.store_files import IndexHeader, QueueEntries, index_paths, queue_ids, read_geometry, scan_all
from mqstore.engine.repair.rebuild import rebuild_derived
from mqstore.engine.repair.recovery import cq_entry_problem
from mqstore.engine.timer.verify import timer_findings

Array = npt.NDArray[Any]


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    location: str
    detail: str


@dataclass(frozen=True, slots=True)
class VerifyReport:
    findings: list[Finding]
    records: int
    cq_entries: int
    index_entries: int
    repaired: bool = False

    @property
    def ok(self) -> bool:
        return not self.findings


def verify_store(path: Path | str, repair: bool = False) -> VerifyReport:
    """Check every derived file against the commitlog. Without ``repair`` nothing is written; with it
    the store is opened (and so recovered), its consume queues and index rebuilt, and then checked.
    Raises FileNotFoundError for a missing store, StoreLockedError when repairing a store in use."""
    store_dir = Path(path)
    if not store_dir.is_dir():
        raise FileNotFoundError(f"no store directory at {store_dir}")
    if repair:
        rebuild_derived(store_dir)
        return replace(_verify(store_dir), repaired=True)
    return _verify(store_dir)


# -- read-only views of a store's files ------------------------------------------------------------


class IndexClaims:
    """Index entries sorted by phys offset, with their entry numbers, and which of them a record
    claimed. Shared by this verifier and the Spark verify job, which must report alike."""

    def __init__(self, numbers: Array, phys: Array, hashes: Array) -> None:
        self.numbers = numbers  # entry number - 1 at each sorted position
        self.phys = phys
        self.hashes = hashes
        self.claimed: Array = np.zeros(len(phys), dtype=bool)

    def claim(self, phys_offset: int, key_hashes: list[int], found: list[bool]) -> None:
        """Mark ``found[i]`` for each key hash with an entry at ``phys_offset``, claiming one entry each."""
        lo = int(self.phys.searchsorted(phys_offset, side="left"))
        hi = int(self.phys.searchsorted(phys_offset, side="right"))
        for j in range(lo, hi):
            entry_hash = int(self.hashes[j])
            for i, key_hash in enumerate(key_hashes):
                if key_hash == entry_hash and not found[i]:
                    found[i] = True
                    self.claimed[j] = True
                    break

    def unclaimed(self) -> Iterator[tuple[int, int, int]]:
        """(entry number, phys_offset, key_hash) of every entry no record claimed."""
        for j in np.flatnonzero(~self.claimed).tolist():
            yield int(self.numbers[j]) + 1, int(self.phys[j]), int(self.hashes[j])


class _IndexCheck(IndexClaims):
    """The entries of one whole index file."""

    def __init__(self, header: IndexHeader, geometry: Geometry) -> None:
        self.header = header
        entries_pos = INDEX_HEADER_SIZE + geometry.index_slot_count * INDEX_SLOT_SIZE + INDEX_ENTRY_SIZE
        mapped = np.memmap(header.path, dtype=INDEX_ENTRY_DTYPE, mode="r", offset=entries_pos,
                           shape=(max(header.index_count - 1, 0),))
        phys = mapped["phys_offset"].astype(np.int64)  # native, for searchsorted; the hashes stay mapped
        hashes = mapped["key_hash"].view(np.ndarray)
        numbers = np.arange(len(phys))
        if len(phys) > 1 and bool((phys[1:] < phys[:-1]).any()):  # only a damaged file is out of order
            numbers = np.argsort(phys, kind="stable")
            phys, hashes = phys[numbers], hashes[numbers]
        super().__init__(numbers, phys, hashes)

    def covers(self, phys_offset: int) -> bool:
        return self.header.begin_phys_offset <= phys_offset <= self.header.end_phys_offset


# -- the walk --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Run:
    first: int
    last: int
    next_position: int
    count: int
    detail: str


class _Runs:
    """Findings of one kind at consecutive positions of one sequence, reported as one per run."""

    def __init__(self, kind: str, unit: str, out: list[Finding]) -> None:
        self.kind, self.unit, self.out = kind, unit, out
        self.open: dict[str, _Run] = {}

    def add(self, scope: str, position: int, next_position: int, detail: str) -> None:
        run = self.open.get(scope)
        if run is not None and run.next_position == position:
            run.last, run.next_position, run.count = position, next_position, run.count + 1
            return
        if run is not None:
            self._emit(scope, run)
        self.open[scope] = _Run(position, position, next_position, 1, detail)

    def close(self) -> None:
        for scope, run in self.open.items():
            self._emit(scope, run)
        self.open.clear()

    def _emit(self, scope: str, run: _Run) -> None:
        if run.count == 1:
            self.out.append(Finding(self.kind, f"{scope} {self.unit} {run.first}", run.detail))
        else:
            self.out.append(Finding(self.kind, f"{scope} {self.unit}s {run.first}..{run.last}",
                                    f"{run.count} in a row; the first: {run.detail}"))


def cq_scope(topic: str, queue_id: int) -> str:
    return f"consumequeue/{topic}/{queue_id}"


class _Verifier:
    def __init__(self, commitlog: CommitLog, geometry: Geometry, queues: dict[tuple[str, int], QueueEntries],
                 index_headers: list[IndexHeader], findings: list[Finding], levels: DelayLevels,
                 deleted: dict[str, int]) -> None:
        self.commitlog = commitlog
        self.deleted = deleted  # topic -> commitlog end when it was deleted
        self.levels = levels
        self.geometry = geometry
        self.min_phys_offset = commitlog.min_offset
        self.queues = queues
        self.claimed_cq = {key: np.zeros(q.end_queue_offset - q.first_queue_offset, dtype=bool)
                           for key, q in queues.items()}
        self.findings = findings
        self.missing_cq = _Runs("cq_entry_missing", "queue offset", findings)
        self.missing_keys = _Runs("index_entry_missing", "phys offset", findings)
        self.index_floor = index_headers[0].begin_phys_offset if index_headers else -1
        self.pending_index = deque(h for h in index_headers if h.index_count > 1)
        self.active_index: list[_IndexCheck] = []
        self.records = self.cq_entries = 0
        self.index_entries = sum(max(h.index_count - 1, 0) for h in index_headers)

    def run(self) -> VerifyReport:
        for phys, decoded in scan_all(self.commitlog, require_prop_crc=self.geometry.prop_crc):
            if decoded.kind is DecodeKind.BLANK:
                continue
            record = decoded.record
            if decoded.kind is not DecodeKind.RECORD:
                self.findings.append(Finding("record_corrupt", f"commitlog phys offset {phys}",
                                             f"{decoded.kind.value}: {decoded.reason}"))
                # Check what the damaged record's entries say, so they add no findings of their own.
                record = self.commitlog.read_record(phys, check_crc=False, read_body=False).record
            if record is not None:
                self._visit(phys, record)
        self.missing_cq.close()
        self.missing_keys.close()
        for check in self.active_index:
            self._finish_index(check)
        for header in self.pending_index:
            self._finish_index(_IndexCheck(header, self.geometry))
        for key, q in sorted(self.queues.items()):
            self._check_queue(q, self.claimed_cq[key])
        return VerifyReport(self.findings, self.records, self.cq_entries, self.index_entries)

    # -- per record --------------------------------------------------------------------------------

    def _visit(self, phys: int, record: Record) -> None:
        self.records += 1
        if record.phys_offset != phys:
            self.findings.append(Finding("record_corrupt", f"commitlog phys offset {phys}",
                                         f"its PHYSICALOFFSET field says {record.phys_offset}"))
        request = DispatchRequest.from_record(record, self.levels)
        if request.has_queue_entry and phys >= self.deleted.get(request.topic, 0):
            self._check_queue_entry(phys, request)
        if 0 <= self.index_floor <= phys and request.sys_flag & SYSFLAG_TX_MASK != SYSFLAG_TX_ROLLBACK:
            self._check_index_keys(phys, request)

    def _check_queue_entry(self, phys: int, request: DispatchRequest) -> None:
        key = (request.topic, request.queue_id)
        q = self.queues.get(key)
        entry = q.entry(request.queue_offset) if q is not None else None
        if q is None or entry is None or entry[0] != phys:
            self.missing_cq.add(cq_scope(*key), request.queue_offset, request.queue_offset + 1,
                                f"record at commitlog phys offset {phys} has no entry")
        elif entry[1:] == (request.size, request.tags_code):
            self.claimed_cq[key][request.queue_offset - q.first_queue_offset] = True
        # else: an entry at the record with another size or tags code; the queue pass reports it

    def _check_index_keys(self, phys: int, request: DispatchRequest) -> None:
        keys = record_keys(request.uniq_key, request.keys)
        key_hashes = [index_hash(index_key(request.topic, key)) for key in keys]
        found = [False] * len(keys)
        for check in self._index_checks_at(phys):
            if check.covers(phys):
                check.claim(phys, key_hashes, found)
        # A key given twice has one entry per copy, but one entry is enough to find it.
        found_hashes = {h for h, ok in zip(key_hashes, found, strict=True) if ok}
        missing = [k for k, h, ok in zip(keys, key_hashes, found, strict=True) if not ok and h not in found_hashes]
        if missing:
            self.missing_keys.add("commitlog", phys, phys + request.size,
                                  f"keys {missing} of topic {request.topic} are not in the index")

    def _index_checks_at(self, phys: int) -> list[_IndexCheck]:
        """Index files load as the walk reaches their begin offset and are checked once it passes
        their end: at most the two files a record's keys can be split across are held."""
        while self.pending_index and self.pending_index[0].begin_phys_offset <= phys:
            self.active_index.append(_IndexCheck(self.pending_index.popleft(), self.geometry))
        for check in [c for c in self.active_index if c.header.end_phys_offset < phys]:
            self.active_index.remove(check)
            self._finish_index(check)
        return self.active_index

    # -- entries no record claimed -----------------------------------------------------------------

    def _finish_index(self, check: _IndexCheck) -> None:
        for entry_no, phys, key_hash in check.unclaimed():
            if 0 <= phys < self.min_phys_offset:
                continue  # the record went with retention; the index file goes later
            problem = self._index_entry_problem(phys, key_hash)
            if problem:
                self.findings.append(Finding("index_entry_unresolved",
                                             f"index/{check.header.path.name} entry {entry_no}", problem))

    def _index_entry_problem(self, phys: int, key_hash: int) -> str:
        decoded = self.commitlog.read_record(phys, check_crc=False, read_body=False)
        record = decoded.record
        if record is None or record.phys_offset != phys:
            return f"no record starts at commitlog phys offset {phys} ({decoded.reason or 'another record is'})"
        if key_hash not in {index_hash(index_key(record.topic, k)) for k in record_keys(record.uniq_key, record.keys)}:
            return f"hash {key_hash} is none of the keys of the record at {phys} (topic {record.topic})"
        return ""

    def _check_queue(self, q: QueueEntries, claimed: Array) -> None:
        self.cq_entries += check_queue_entries(q, claimed, self.min_phys_offset, lambda: self.commitlog,
                                               self.findings, self.levels)


def check_queue_entries(q: QueueEntries, claimed: Array, min_phys_offset: int, commitlog: Callable[[], CommitLog],
                        findings: list[Finding], levels: DelayLevels) -> int:
    """The queue pass: past the leading fillers and the entries whose records retention deleted,
    every entry no record confirmed is decoded to say what is wrong with it. Returns how many
    entries were checked. ``commitlog`` is called only when there is something to decode."""
    live, checked = False, 0
    for file_no, arr in enumerate(q.files):
        base = file_no * q.entries_per_file
        count = min(q.entries_per_file, q.end_queue_offset - q.first_queue_offset - base)
        if count <= 0:
            break
        phys, size = arr["phys_offset"][:count], arr["size"][:count]
        start = 0
        if not live:
            skip = (size == FILLER_SIZE) | (entry_valid(phys, size) & (phys < min_phys_offset))
            start = count if bool(skip.all()) else int(np.argmin(skip))
            live = start < count
        checked += count - start
        for k in (np.flatnonzero(~claimed[base + start:base + count]) + start).tolist():
            row = arr[k]
            queue_offset = q.first_queue_offset + base + k
            problem = cq_entry_problem(commitlog(), q.topic, q.queue_id, queue_offset, int(row["phys_offset"]),
                                       int(row["size"]), int(row["tags_code"]), levels)
            if problem:
                findings.append(Finding("cq_entry_mismatch", f"{cq_scope(q.topic, q.queue_id)} "
                                        f"queue offset {queue_offset}", problem))
    return checked


def _verify(store_dir: Path) -> VerifyReport:
    geometry = read_geometry(store_dir)
    findings: list[Finding] = []
    queues: dict[tuple[str, int], QueueEntries] = {}
    for topic, queue_id in queue_ids(store_dir):
        try:
            queues[(topic, queue_id)] = QueueEntries.open(store_dir, topic, queue_id, geometry.cq_entries_per_file)
        except MappedFileError as exc:
            findings.append(Finding("file_unreadable", cq_scope(topic, queue_id), str(exc)))
    headers: list[IndexHeader] = []
    for path in index_paths(store_dir):
        try:
            headers.append(IndexHeader.read(path, geometry))
        except IndexFileError as exc:
            findings.append(Finding("file_unreadable", f"index/{path.name}", str(exc)))
    commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size, writable=False)
    try:
        findings += [Finding(*found) for found in timer_findings(store_dir, commitlog)]
        return _Verifier(commitlog, geometry, queues, headers, findings, read_delay_levels(store_dir),
                         deleted_topics(store_dir)).run()
    finally:
        commitlog.close()
