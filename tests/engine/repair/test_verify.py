"""verify_store on real tiny stores: clean, each planted corruption, and repair."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from mqstore.engine import Message, MessageStore, PutResult
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE
from mqstore.engine.keyindex.index_file import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from mqstore.engine.log.mapped_file import file_name
from mqstore.engine.log.record import SYSFLAG_TX_PREPARED, SYSFLAG_TX_ROLLBACK
from mqstore.engine.meta.metafile import abort_exists
from mqstore.engine.read.store_files import IndexHeader, QueueEntries, index_paths, read_geometry
from mqstore.engine.repair.verify import VerifyReport, verify_store
from tests.conftest import TINY

OpenStore = Callable[..., MessageStore]
COUNT = 60
BODY_POS = 88  # BODYLENGTH at 84 with IPv4 hosts, then the body


@pytest.fixture
def store_dir(tmp_path: Path, open_store: OpenStore) -> Path:
    return _build(tmp_path / "store", open_store)[0]


def _build(path: Path, open_store: OpenStore, count: int = COUNT) -> tuple[Path, list[PutResult]]:
    store = open_store(path)
    messages = [Message("Orders", f"body-{i}".encode() * 4, tags="TagA" if i % 2 else "TagB", keys=(f"key-{i}",))
                for i in range(count)]
    results = store.put_batch(messages, [i % 3 for i in range(count)])
    assert all(r.ok for r in results)
    store.close()
    return path, results


def _patch(path: Path, pos: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(pos)
        f.write(data)


def _commitlog_patch(store_dir: Path, phys_offset: int, data: bytes) -> None:
    base = phys_offset - phys_offset % TINY.commitlog_file_size
    _patch(store_dir / "commitlog" / file_name(base), phys_offset - base, data)


def _kinds(report: VerifyReport) -> set[str]:
    return {f.kind for f in report.findings}


def _snapshot(store_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store_dir)): p.read_bytes() for p in sorted(store_dir.rglob("*")) if p.is_file()}


def _index_entry_pos(entry_no: int) -> int:
    return INDEX_HEADER_SIZE + TINY.index_slot_count * INDEX_SLOT_SIZE + entry_no * INDEX_ENTRY_SIZE


def test_clean_store_has_no_findings(store_dir: Path) -> None:
    report = verify_store(store_dir)
    assert report.ok, report.findings
    assert (report.records, report.cq_entries) == (COUNT, COUNT)
    assert report.index_entries == 2 * COUNT  # UNIQ_KEY and one key each
    assert not report.repaired


def test_verify_writes_nothing(store_dir: Path) -> None:
    _commitlog_patch(store_dir, 0, b"\xff" * 4)
    (store_dir / "lock").unlink()
    before = _snapshot(store_dir)
    assert not verify_store(store_dir).ok
    assert _snapshot(store_dir) == before
    assert not abort_exists(store_dir) and not (store_dir / "lock").exists()


def test_flipped_body_byte_is_record_corrupt(tmp_path: Path, open_store: OpenStore) -> None:
    store_dir, results = _build(tmp_path / "store", open_store)
    victim = results[COUNT // 2].phys_offset
    _commitlog_patch(store_dir, victim + BODY_POS, b"X")
    report = verify_store(store_dir)
    assert _kinds(report) == {"record_corrupt"}
    assert report.findings[0].location == f"commitlog phys offset {victim}"
    assert "CRC" in report.findings[0].detail
    assert report.records == COUNT  # the walk goes on past the damaged record


def test_garbage_after_the_last_record_is_record_corrupt(tmp_path: Path, open_store: OpenStore) -> None:
    store_dir, results = _build(tmp_path / "store", open_store)
    last = results[-1].phys_offset
    _commitlog_patch(store_dir, last + _record_size(store_dir, last) + 16, b"torn")
    assert _kinds(verify_store(store_dir)) == {"record_corrupt"}


def _record_size(store_dir: Path, phys_offset: int) -> int:
    base = phys_offset - phys_offset % TINY.commitlog_file_size
    data = (store_dir / "commitlog" / file_name(base)).read_bytes()
    return int(struct.unpack_from(">i", data, phys_offset - base)[0])


def test_cq_entry_with_another_size_is_a_mismatch(store_dir: Path) -> None:
    _patch(store_dir / "consumequeue" / "Orders" / "1" / file_name(0), 3 * CQ_ENTRY_SIZE + 8,
           struct.pack(">i", 99))
    report = verify_store(store_dir)
    assert _kinds(report) == {"cq_entry_mismatch"}
    assert report.findings[0].location == "consumequeue/Orders/1 queue offset 3"
    assert "size" in report.findings[0].detail


def test_cq_entry_with_another_tags_code_is_a_mismatch(store_dir: Path) -> None:
    _patch(store_dir / "consumequeue" / "Orders" / "2" / file_name(0), 5 * CQ_ENTRY_SIZE + 12,
           struct.pack(">q", 12345))
    report = verify_store(store_dir)
    assert [(f.kind, f.location) for f in report.findings] == [
        ("cq_entry_mismatch", "consumequeue/Orders/2 queue offset 5")]


def test_deleted_queue_directory_is_one_run_of_missing_entries(store_dir: Path) -> None:
    shutil.rmtree(store_dir / "consumequeue" / "Orders" / "0")
    report = verify_store(store_dir)
    assert [(f.kind, f.location) for f in report.findings] == [
        ("cq_entry_missing", f"consumequeue/Orders/0 queue offsets 0..{COUNT // 3 - 1}")]


@pytest.mark.parametrize("bogus", [0, 3], ids=["zeroed", "not-a-record-start"])
def test_bad_index_entry_is_unresolved(tmp_path: Path, open_store: OpenStore, bogus: int) -> None:
    store_dir = _build(tmp_path / "store", open_store)[0]
    geometry = read_geometry(store_dir)
    headers = [IndexHeader.read(p, geometry) for p in index_paths(store_dir)]
    header = next(h for h in headers if h.begin_phys_offset > 0 and h.index_count > 2)
    entry_no = 2
    phys_pos = _index_entry_pos(entry_no) + 4
    (phys_offset,) = struct.unpack_from(">q", header.path.read_bytes(), phys_pos)
    _patch(header.path, phys_pos, struct.pack(">q", phys_offset + bogus if bogus else 0))
    report = verify_store(store_dir)
    assert ("index_entry_unresolved", f"index/{header.path.name} entry {entry_no}") in {
        (f.kind, f.location) for f in report.findings}
    # The record whose entry it was has lost one of its keys.
    assert _kinds(report) == {"index_entry_unresolved", "index_entry_missing"}


def test_missing_index_file_is_missing_keys(store_dir: Path) -> None:
    paths = index_paths(store_dir)
    paths[len(paths) // 2].unlink()
    report = verify_store(store_dir)
    assert _kinds(report) == {"index_entry_missing"}


def test_index_file_of_another_size_is_unreadable(store_dir: Path) -> None:
    with index_paths(store_dir)[-1].open("ab") as f:
        f.write(b"\0" * 4)
    assert "file_unreadable" in _kinds(verify_store(store_dir))


def test_transactions_prepared_and_rolled_back_need_no_queue_entry(tmp_path: Path, open_store: OpenStore) -> None:
    store = open_store(tmp_path / "store")
    store.put(Message("Orders", b"half", keys=("tx",), sys_flag=SYSFLAG_TX_PREPARED))
    store.put(Message("Orders", b"undone", keys=("rb",), sys_flag=SYSFLAG_TX_ROLLBACK))
    store.put(Message("Orders", b"whole", keys=("plain",)))
    store.close()
    report = verify_store(tmp_path / "store")
    assert report.ok, report.findings
    # a rolled-back record is not indexed either; a prepared one is
    assert (report.records, report.cq_entries, report.index_entries) == (3, 1, 4)


def test_records_gone_with_retention_are_not_findings(tmp_path: Path, open_store: OpenStore) -> None:
    store_dir, results = _build(tmp_path / "store", open_store, count=120)
    (store_dir / "commitlog" / file_name(0)).unlink()  # queues and index still point into it
    report = verify_store(store_dir)
    assert report.ok, report.findings
    assert report.records == report.cq_entries == sum(r.phys_offset >= TINY.commitlog_file_size for r in results)


def test_missing_store_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        verify_store(tmp_path / "nowhere")


def test_repair_rebuilds_queues_and_index_byte_for_byte(store_dir: Path) -> None:
    cq_before = _snapshot(store_dir / "consumequeue")
    shutil.rmtree(store_dir / "consumequeue")
    shutil.rmtree(store_dir / "index")
    assert _kinds(verify_store(store_dir)) == {"cq_entry_missing"}
    report = verify_store(store_dir, repair=True)
    assert report.ok, report.findings
    assert report.repaired
    assert (report.records, report.cq_entries, report.index_entries) == (COUNT, COUNT, 2 * COUNT)
    assert _snapshot(store_dir / "consumequeue") == cq_before
    assert not abort_exists(store_dir)


def test_repair_fixes_planted_damage_in_derived_files(store_dir: Path) -> None:
    _patch(store_dir / "consumequeue" / "Orders" / "1" / file_name(0), 8, struct.pack(">i", 7))
    paths = index_paths(store_dir)
    _patch(paths[0], _index_entry_pos(1) + 4, struct.pack(">q", 5))
    assert not verify_store(store_dir).ok
    assert verify_store(store_dir, repair=True).ok


def test_queue_entries_bounds(store_dir: Path) -> None:
    q = QueueEntries.open(store_dir, "Orders", 1, TINY.cq_entries_per_file)
    assert (q.min_queue_offset, q.end_queue_offset) == (0, COUNT // 3)
    assert q.entry(COUNT // 3) is None
    assert q.entry(0) is not None
