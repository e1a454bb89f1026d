"""The Spark jobs against the engine: export round trip, verify with the same findings as
``verify_store``, rebuild byte for byte what the engine builds, stats against a plain count, and the
``mqstore spark`` command end to end."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine import Geometry, Message, MessageStore, StoreConfig, StoreLockedError
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE
from mqstore.engine.keyindex.index_file import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import file_name
from mqstore.engine.log.record import SYSFLAG_TX_COMMIT, SYSFLAG_TX_PREPARED, SYSFLAG_TX_ROLLBACK, DecodeKind, Record
from mqstore.engine.meta.metafile import abort_exists
from mqstore.engine.meta.topics import TopicTable
from mqstore.engine.read.store_files import index_paths, read_geometry, scan_all
from mqstore.engine.repair.rebuild import rebuild_derived
from mqstore.engine.repair.verify import VerifyReport, verify_store
from mqstore.pipeline.jobs import main
from mqstore.pipeline.schema import COLUMN_NAMES
from tests.pipeline.conftest import StepClock

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
# Small files, so that commitlog files, consume-queue files and index files all roll, and small
# task ranges, so that every commitlog file is cut into several.
TX_GEOMETRY = Geometry(commitlog_file_size=8192, cq_entries_per_file=16, index_slot_count=16, index_entry_count=64)
SPLIT_BYTES = 2048
TX_TOPICS = ("Orders", "Audit", "Pay")
TX_FLAGS = (0, 0, 0, SYSFLAG_TX_PREPARED, 0, SYSFLAG_TX_ROLLBACK, SYSFLAG_TX_COMMIT)
BODY_POS = 88  # BODYLENGTH at 84 with IPv4 hosts, then the body


@pytest.fixture(scope="module")
def tx_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """240 records over six minutes: three topics, tags and keys on some, prepared, committed and
    rolled-back transactions among them."""
    path = tmp_path_factory.mktemp("jobs") / "tx-store"
    clock = StepClock(1_700_000_000_000)
    with MessageStore.open(path, StoreConfig(geometry=TX_GEOMETRY), now_ms=clock) as store:
        for batch in range(6):
            messages = [Message(TX_TOPICS[i % 3], f"body-{batch}-{i}".encode() * 3, tags=("A", "B", None)[i % 3],
                                keys=(f"k{batch}-{i}", "shared") if i % 4 else (), sys_flag=TX_FLAGS[i % 7])
                        for i in range(40)]
            assert all(r.ok for r in store.put_batch(messages, [i % 3 for i in range(40)]))
            clock.now += 61_000
    return path


def _copy(store: Path, tmp_path: Path, name: str = "copy") -> Path:
    target = tmp_path / name
    shutil.copytree(store, target)
    return target


def _patch(path: Path, pos: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(pos)
        f.write(data)


def _records(store: Path) -> list[tuple[int, Record]]:
    geometry = read_geometry(store)
    commitlog = CommitLog.open(store / "commitlog", geometry.commitlog_file_size, writable=False)
    try:
        return [(phys, d.record) for phys, d in scan_all(commitlog) if d.kind is DecodeKind.RECORD and d.record]
    finally:
        commitlog.close()


def _commitlog_patch(store: Path, phys: int, data: bytes) -> None:
    size = read_geometry(store).commitlog_file_size
    _patch(store / "commitlog" / file_name(phys - phys % size), phys % size, data)


def _derived(store: Path) -> tuple[dict[str, bytes], list[bytes]]:
    """Every consume-queue file by path, and the index files' contents in name order (their names
    come from the clock)."""
    queues = {str(p.relative_to(store)): p.read_bytes() for p in sorted((store / "consumequeue").rglob("*"))
              if p.is_file()}
    return queues, [p.read_bytes() for p in index_paths(store)]


def _findings(report: VerifyReport) -> list[tuple[str, str, str]]:
    return sorted((f.kind, f.location, f.detail) for f in report.findings)


# -- export ----------------------------------------------------------------------------------------


def test_export_round_trip_parquet(spark: Any, store_dir: Path, tmp_path: Path) -> None:
    from mqstore.pipeline.export_job import export

    out = tmp_path / "export"
    result = export(spark, store_dir, out)
    source = spark.read.format("mqstore").load(str(store_dir))
    back = spark.read.parquet(str(out))
    assert back.count() == source.count() == 3000
    assert back.select(*COLUMN_NAMES).orderBy("phys_offset").collect() == source.orderBy("phys_offset").collect()
    # one directory per topic and UTC date of the store time
    expected = {f"topic={r['topic']}/date={r['store_timestamp'].replace(tzinfo=UTC).date().isoformat()}"
                for r in source.select("topic", "store_timestamp").collect()}
    assert set(result.partitions) == expected
    assert all((out / p).is_dir() for p in expected)


def test_export_json_of_one_topic(spark: Any, store_dir: Path, tmp_path: Path) -> None:
    from mqstore.pipeline.export_job import export

    out = tmp_path / "export"
    result = export(spark, store_dir, out, fmt="json", topics=["Payments"])
    assert result.partitions and all(p.startswith("topic=Payments/") for p in result.partitions)
    assert spark.read.json(str(out)).count() == 1000


# -- verify ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("store_name", ["store_dir", "tx_store"])
def test_verify_clean_store_agrees_with_the_engine(spark: Any, store_name: str, request: pytest.FixtureRequest
                                                   ) -> None:
    from mqstore.pipeline.verify_job import verify

    store = request.getfixturevalue(store_name)
    ours, engine = verify(spark, store), verify_store(store)
    assert ours.ok and engine.ok, ours.findings
    assert (ours.records, ours.cq_entries, ours.index_entries) == \
        (engine.records, engine.cq_entries, engine.index_entries)


def _flip_body_byte(store: Path) -> None:
    records = _records(store)
    _commitlog_patch(store, records[len(records) // 2][0] + BODY_POS, b"X")


def _overwrite_cq_size(store: Path) -> None:
    _patch(store / "consumequeue" / "Orders" / "0" / file_name(0), 3 * CQ_ENTRY_SIZE + 8, struct.pack(">i", 99))


def _delete_cq_dir(store: Path) -> None:
    shutil.rmtree(store / "consumequeue" / "Audit" / "1")


def _index_entry_pos(entry_no: int) -> int:
    return INDEX_HEADER_SIZE + TX_GEOMETRY.index_slot_count * INDEX_SLOT_SIZE + entry_no * INDEX_ENTRY_SIZE


def _bogus_index_entry(store: Path) -> None:
    path = index_paths(store)[2]
    phys_pos = _index_entry_pos(2) + 4
    (phys,) = struct.unpack_from(">q", path.read_bytes(), phys_pos)
    _patch(path, phys_pos, struct.pack(">q", phys + 3))  # not a record start


def _drop_last_index_entry(store: Path) -> None:
    path = index_paths(store)[-1]
    (index_count,) = struct.unpack_from(">i", path.read_bytes(), 36)
    _patch(path, 36, struct.pack(">i", index_count - 1))


def _garbage_after_last_record(store: Path) -> None:
    phys, record = _records(store)[-1]
    _commitlog_patch(store, phys + record.size + 16, b"torn")


@pytest.mark.parametrize(("plant", "kinds"), [
    (_flip_body_byte, {"record_corrupt"}),
    (_overwrite_cq_size, {"cq_entry_mismatch"}),
    (_delete_cq_dir, {"cq_entry_missing"}),
    (_bogus_index_entry, {"index_entry_unresolved", "index_entry_missing"}),
    (_drop_last_index_entry, {"index_entry_missing"}),
    (_garbage_after_last_record, {"record_corrupt"}),
], ids=lambda v: getattr(v, "__name__", "")[1:] or None)
def test_verify_finds_planted_corruption_as_the_engine_does(spark: Any, tx_store: Path, tmp_path: Path,
                                                            plant: Callable[[Path], None], kinds: set[str]) -> None:
    from mqstore.pipeline.verify_job import verify

    store = _copy(tx_store, tmp_path)
    plant(store)
    engine = verify_store(store)
    ours = verify(spark, store, split_bytes=SPLIT_BYTES)
    assert {f.kind for f in engine.findings} == kinds
    assert _findings(ours) == _findings(engine)
    assert (ours.records, ours.cq_entries, ours.index_entries) == \
        (engine.records, engine.cq_entries, engine.index_entries)


def test_verify_command_reports_json_lines_and_exit_status(spark: Any, tx_store: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    store = _copy(tx_store, tmp_path)
    _delete_cq_dir(store)
    report = tmp_path / "findings.jsonl"
    rc = main(["verify", str(store), "--json", "--report", str(report), "--split-bytes", str(SPLIT_BYTES)])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rc == 1
    assert [(o["kind"], o["location"], o["detail"]) for o in lines if o["type"] == "finding"] == \
        _findings(verify_store(store))
    assert lines[-1]["type"] == "verify" and lines[-1]["ok"] is False
    assert report.read_text().splitlines() == [json.dumps(o) for o in lines]
    assert main(["verify", str(tx_store), "--split-bytes", str(SPLIT_BYTES)]) == 0


# -- rebuild ---------------------------------------------------------------------------------------


# one Spark job per range reaches the index builder: ranges of a few records would cost seconds
@pytest.mark.parametrize(("store_name", "split_bytes"), [("store_dir", 32 * 1024), ("tx_store", SPLIT_BYTES)])
def test_rebuild_restores_byte_identical_derived_files(spark: Any, store_name: str, split_bytes: int, tmp_path: Path,
                                                       request: pytest.FixtureRequest) -> None:
    from mqstore.pipeline.rebuild_job import rebuild

    original = request.getfixturevalue(store_name)
    before = _derived(original)
    ours, theirs = _copy(original, tmp_path, "spark"), _copy(original, tmp_path, "engine")
    for store in (ours, theirs):
        shutil.rmtree(store / "consumequeue")
        shutil.rmtree(store / "index")
    (ours / "index.rebuilding").mkdir()  # what a rebuild killed part way leaves
    (ours / "index.rebuilding" / "20240101000000000").write_bytes(b"half an index")
    (ours / "abort").write_text("12345")
    result = rebuild(spark, ours, split_bytes=split_bytes)
    assert result.records == len(_records(original))
    assert _derived(ours) == before
    assert rebuild_derived(theirs) == result
    assert _derived(ours) == _derived(theirs)
    assert not abort_exists(ours) and not (ours / "index.rebuilding").exists()
    MessageStore.open(ours).close()  # opens cleanly
    assert verify_store(ours).ok


def _delete_topic(store: Path, topic: str) -> None:
    """What ``mqstore topics delete`` leaves: the deletion recorded in topics.json with the commitlog's
    end, the topic's consume queues gone; its records stay in the commitlog."""
    end = max(phys + record.size for phys, record in _records(store))
    table = TopicTable.load(store, lambda: 1_700_000_000_000)
    table.create(topic, 3)  # a store written by MessageStore alone has no topics file yet
    assert table.delete(topic, end)
    shutil.rmtree(store / "consumequeue" / topic)


def test_verify_and_rebuild_honour_a_deleted_topic_as_the_engine_does(spark: Any, tx_store: Path,
                                                                     tmp_path: Path) -> None:
    from mqstore.pipeline.rebuild_job import rebuild
    from mqstore.pipeline.verify_job import verify

    ours, theirs = _copy(tx_store, tmp_path, "spark"), _copy(tx_store, tmp_path, "engine")
    for store in (ours, theirs):
        _delete_topic(store, "Audit")
    assert verify_store(ours).ok
    assert _findings(verify(spark, ours, split_bytes=SPLIT_BYTES)) == []
    rebuild(spark, ours, split_bytes=SPLIT_BYTES)
    rebuild_derived(theirs)
    assert not (ours / "consumequeue" / "Audit").exists()
    assert _derived(ours) == _derived(theirs)
    assert (ours / "consumequeue" / "Orders").is_dir()


def test_rebuild_refuses_a_store_in_use(spark: Any, tx_store: Path, tmp_path: Path) -> None:
    from mqstore.pipeline.rebuild_job import rebuild

    store = _copy(tx_store, tmp_path)
    before = _derived(store)
    with MessageStore.open(store), pytest.raises(StoreLockedError):
        rebuild(spark, store)
    assert _derived(store) == before


def test_rebuild_refuses_a_damaged_commitlog_and_writes_nothing(spark: Any, tx_store: Path, tmp_path: Path) -> None:
    from mqstore.pipeline.rebuild_job import DamagedCommitLogError, rebuild

    store = _copy(tx_store, tmp_path)
    _flip_body_byte(store)
    before = _derived(store)
    with pytest.raises(DamagedCommitLogError, match="body CRC mismatch"):
        rebuild(spark, store, split_bytes=SPLIT_BYTES)
    assert _derived(store) == before
    assert not abort_exists(store)


# -- stats -----------------------------------------------------------------------------------------


def _plain_stats(store: Path) -> dict[tuple[str, int], tuple[int, int, int, dict[str, int]]]:
    counts: dict[tuple[str, int], list[Any]] = defaultdict(lambda: [0, 0, set(), Counter()])
    for _, record in _records(store):
        row = counts[(record.topic, record.store_ms // 60_000 * 60_000)]
        row[0] += 1
        row[1] += record.size
        row[2].update(record.keys)
        row[3][record.tags or ""] += 1
    return {key: (n, size, len(keys), dict(tags)) for key, (n, size, keys, tags) in counts.items()}


def _assert_png(path: Path) -> None:
    from PIL import Image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] > 100


def test_stats_match_a_plain_count(spark: Any, tx_store: Path, tmp_path: Path) -> None:
    from mqstore.pipeline.report import plot_messages
    from mqstore.pipeline.stats_job import traffic_stats, write_tables

    rows = traffic_stats(spark, tx_store)
    assert {(r.topic, r.minute_ms): (r.messages, r.bytes, r.keys, r.tags) for r in rows} == _plain_stats(tx_store)
    assert len({r.minute_ms for r in rows}) == 6
    csv_path, json_path = write_tables(rows, tmp_path)
    assert len(csv_path.read_text().splitlines()) == len(rows) + 1
    first = json.loads(json_path.read_text())[0]
    assert first["minute"] == datetime.fromtimestamp(rows[0].minute_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _assert_png(plot_messages(rows, tmp_path / "stats.png", "test"))


def test_mqstore_spark_stats_end_to_end(store_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "stats"
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "spark", "stats", str(store_dir),
                           "--out", str(out), "--master", "local[2]"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "traffic per topic and minute" in proc.stdout
    table = json.loads((out / "stats.json").read_text())
    assert sum(row["messages"] for row in table) == 3000
    assert {row["topic"] for row in table} == {"Orders", "Payments", "Audit"}
    _assert_png(out / "stats.png")


def test_spark_command_without_pyspark_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    from mqstore.scripts.cli.mqstore import main as mqstore_main

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real_find_spec(name, *a))
    assert mqstore_main(["spark", "verify", "nowhere"]) == 2
    assert "pip install -e '.[spark]'" in capsys.readouterr().err
