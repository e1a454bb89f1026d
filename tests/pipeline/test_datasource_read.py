"""``spark.read.format("mqstore")``: rows equal what the engine decodes, partitions, pushdown, options."""

from __future__ import annotations

import shutil
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine import Geometry, Message, MessageStore, StoreConfig
from mqstore.engine.config import GEOMETRY_FILE
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import SYSFLAG_TX_PREPARED, SYSFLAG_TX_ROLLBACK, DecodeKind, Record
from tests.pipeline.conftest import (
    STORE_GEOMETRY,
    STORE_MESSAGES,
    STORE_START_MS,
    StepClock,
    store_message,
    write_messages,
)

pytestmark = pytest.mark.spark


def engine_records(store: Path, geometry: Geometry = STORE_GEOMETRY) -> list[Record]:
    commitlog = CommitLog.open(store / "commitlog", geometry.commitlog_file_size, writable=False)
    try:
        return [d.record for _, d in commitlog.scan(0, check_crc=True) if d.kind is DecodeKind.RECORD and d.record]
    finally:
        commitlog.close()


def ts(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def expected_row(r: Record, *, body: bool = True) -> dict[str, Any]:
    """A Record as the row the data source must give, field by field, built without the pipeline."""
    return {
        "topic": r.topic, "queue_id": r.queue_id, "queue_offset": r.queue_offset, "phys_offset": r.phys_offset,
        "size": r.size, "flag": r.flag, "sys_flag": r.sys_flag, "body_crc": r.body_crc, "tags": r.tags,
        "keys": r.keys, "properties": r.properties, "body": r.body if body else None,
        "born_timestamp": ts(r.born_ms), "born_host": str(r.born_host), "store_timestamp": ts(r.store_ms),
        "store_host": str(r.store_host), "reconsume_times": r.reconsume_times,
        "prepared_tx_offset": r.prepared_tx_offset, "msg_id": r.msg_id, "uniq_key": r.uniq_key,
    }


def rows_of(df: Any) -> list[dict[str, Any]]:
    """Rows through Arrow, timestamps as aware UTC datetimes, maps as dicts, sorted by phys offset."""
    rows = df.toArrow().to_pylist()
    for row in rows:
        row["properties"] = dict(row["properties"]) if row["properties"] is not None else None
    return sorted(rows, key=lambda row: row["phys_offset"])


def load(spark: Any, store: Path, **options: str) -> Any:
    """A fresh ``load()`` per query: Spark 4.3.0 keeps the read planned for a filtered query on the
    loaded relation and reuses it for a later unfiltered scan of the same DataFrame (see
    ``test_spark_reuses_a_filtered_read_plan``)."""
    return spark.read.format("mqstore").options(**options).load(str(store))


def executed_plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def filter_node(plan: str) -> str:
    """The text of the Filter node Spark kept above the scan ("" when it kept none)."""
    return next((line for line in plan.splitlines() if "Filter" in line and "BatchScan" not in line), "")


def test_round_trip_equals_engine_decode(spark: Any, store_dir: Path) -> None:
    df = spark.read.format("mqstore").load(str(store_dir))
    rows = rows_of(df)
    expected = [expected_row(r) for r in engine_records(store_dir)]
    assert len(rows) == STORE_MESSAGES == len(expected)
    assert rows == expected
    assert any(row["born_host"].startswith("[") for row in rows)  # IPv6 born hosts, "[ip]:port"
    files = len(list((store_dir / "commitlog").iterdir()))
    assert df.rdd.getNumPartitions() >= files > 1


def test_tuple_rows_equal_arrow_rows(spark: Any, store_dir: Path) -> None:
    """``arrow=false`` yields tuples instead of Arrow batches: the same table, row for row."""
    tuples = rows_of(spark.read.format("mqstore").option("arrow", "false").load(str(store_dir)))
    assert tuples == [expected_row(r) for r in engine_records(store_dir)]


def test_rocketmq_style_store_without_geometry_file(spark: Any, tmp_path: Path) -> None:
    """A store written without the whole-record CRC and without config/storeGeometry.json (as Apache
    RocketMQ writes one): geometry is read off the files."""
    store = tmp_path / "rmq"
    write_messages(store, 0, 600, geometry=Geometry(commitlog_file_size=64 * 1024, cq_entries_per_file=256,
                                                     index_slot_count=64, index_entry_count=512, prop_crc=False))
    for path in (store / "config").glob(GEOMETRY_FILE + "*"):
        path.unlink()
    records = engine_records(store)
    assert len(records) == 600
    assert b"__CRC32#" not in (store / "commitlog" / "00000000000000000000").read_bytes()
    assert rows_of(spark.read.format("mqstore").load(str(store))) == [expected_row(r) for r in records]
    orders = spark.read.format("mqstore").load(str(store)).filter("topic = 'Orders' AND queue_id = 2")
    assert rows_of(orders) == [expected_row(r) for r in records if r.topic == "Orders" and r.queue_id == 2]


def test_big_files_are_cut_at_record_boundaries(spark: Any, store_dir: Path) -> None:
    files = len(list((store_dir / "commitlog").iterdir()))
    df = spark.read.format("mqstore").option("partitionBytes", 16 * 1024).load(str(store_dir))
    assert df.rdd.getNumPartitions() >= 3 * files
    phys = [row.phys_offset for row in df.select("phys_offset").collect()]
    assert sorted(phys) == [r.phys_offset for r in engine_records(store_dir)]  # no record lost or doubled


def test_queue_filters_are_consumed_and_read_through_consume_queues(spark: Any, store_dir: Path) -> None:
    from mqstore.pipeline.plan import QueueSlicePartition
    from mqstore.pipeline.reader import MqstorePushdownReader

    df = spark.read.format("mqstore").load(str(store_dir)).filter(
        "topic = 'Orders' AND queue_id = 1 AND queue_offset >= 10 AND queue_offset < 30 AND tags = 'tag1'")
    plan = executed_plan(df)
    residual = filter_node(plan)
    assert "tags" in residual  # not consumed: Spark still applies it
    for consumed in ("topic", "queue_id", "queue_offset"):
        assert f"{consumed}#" not in residual, plan
    assert df.rdd.getNumPartitions() == 1
    expected = [expected_row(r) for r in engine_records(store_dir)
                if r.topic == "Orders" and r.queue_id == 1 and 10 <= r.queue_offset < 30 and r.tags == "tag1"]
    assert rows_of(df) == expected and expected

    # what the tasks decode: one queue's entries 10..29, nothing else
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

    from mqstore.pipeline.options import ReadOptions

    reader = MqstorePushdownReader(ReadOptions.parse({"path": str(store_dir)}))
    left = list(reader.pushFilters([EqualTo(("topic",), "Orders"), EqualTo(("queue_id",), 1),
                                    GreaterThanOrEqual(("queue_offset",), 10), LessThan(("queue_offset",), 30)]))
    assert left == []
    assert reader.partitions() == [QueueSlicePartition("Orders", 1, 10, 30)]


def test_offset_and_time_filters_prune_files(spark: Any, store_dir: Path) -> None:
    records = engine_records(store_dir)
    all_partitions = load(spark, store_dir).rdd.getNumPartitions()
    lo_ms, hi_ms = STORE_START_MS + 8_000, STORE_START_MS + 11_000
    df = load(spark, store_dir)
    by_time = df.filter(df.store_timestamp.between(ts(lo_ms), ts(hi_ms)))
    assert filter_node(executed_plan(by_time)) == ""
    assert by_time.rdd.getNumPartitions() < all_partitions / 2
    assert rows_of(by_time) == [expected_row(r) for r in records if lo_ms <= r.store_ms <= hi_ms]

    lo, hi = records[700].phys_offset, records[900].phys_offset
    df = load(spark, store_dir)
    by_phys = df.filter((df.phys_offset > lo) & (df.phys_offset <= hi))
    assert filter_node(executed_plan(by_phys)) == ""
    assert by_phys.rdd.getNumPartitions() <= 3
    assert rows_of(by_phys) == [expected_row(r) for r in records if lo < r.phys_offset <= hi]

    in_list = load(spark, store_dir).filter(
        "topic IN ('Audit', 'Nope') AND queue_id IN (0, 3) AND store_timestamp < "
        f"timestamp'{ts(STORE_START_MS + 5_000).strftime('%Y-%m-%d %H:%M:%S')}'")
    assert filter_node(executed_plan(in_list)) == ""
    assert rows_of(in_list) == [expected_row(r) for r in records if r.topic == "Audit" and r.queue_id in (0, 3)
                                and r.store_ms < STORE_START_MS + 5_000]


def test_topics_option_and_include_body_false(spark: Any, store_dir: Path) -> None:
    df = spark.read.format("mqstore").option("topics", "Payments, Audit").option("includeBody", "false") \
        .load(str(store_dir))
    expected = [expected_row(r, body=False) for r in engine_records(store_dir) if r.topic in ("Payments", "Audit")]
    assert rows_of(df) == expected


def test_transaction_records_are_rows_whatever_the_filters(spark: Any, tmp_path: Path) -> None:
    """Prepared and rolled-back records have no consume-queue entry: a topic filter must still find
    them (their files are scanned instead of read through the queues)."""
    store = tmp_path / "tx"
    clock = StepClock(STORE_START_MS)
    with MessageStore.open(store, StoreConfig(geometry=STORE_GEOMETRY), now_ms=clock) as s:
        for i in range(900):
            m = store_message(i)
            if i % 150 == 7:
                m = Message(m.topic, m.body, tags=m.tags, sys_flag=SYSFLAG_TX_PREPARED if i % 300 == 7
                            else SYSFLAG_TX_ROLLBACK)
            assert s.put(m, i % 4).ok
    records = engine_records(store)
    tx = [r for r in records if r.transaction_type]
    assert len(tx) == 6
    assert rows_of(load(spark, store)) == [expected_row(r) for r in records]
    for topic in ("Orders", "Payments", "Audit"):
        filtered = load(spark, store).filter(f"topic = '{topic}' AND queue_id = {tx[0].queue_id}")
        assert rows_of(filtered) == [expected_row(r) for r in records
                                     if r.topic == topic and r.queue_id == tx[0].queue_id]


def _copy(store_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(store_dir, copy)
    return copy


def test_verify_crc_raises_on_a_damaged_record(spark: Any, store_dir: Path, tmp_path: Path) -> None:
    store = _copy(store_dir, tmp_path)
    victim = engine_records(store)[40]  # in the first file, records follow it
    first_file = store / "commitlog" / "00000000000000000000"
    data = bytearray(first_file.read_bytes())
    body_at = bytes(data).find(victim.body, victim.phys_offset, victim.phys_offset + victim.size)
    assert body_at > 0
    data[body_at] ^= 0xFF
    first_file.write_bytes(bytes(data))

    # without verifyCrc the body CRC is not checked in older files: the row is there, damaged
    assert spark.read.format("mqstore").load(str(store)).count() == STORE_MESSAGES
    with pytest.raises(Exception, match=rf"position {victim.phys_offset} .*damaged: (body|whole-record) CRC"):
        spark.read.format("mqstore").option("verifyCrc", "true").load(str(store)).count()
    # read through its consume queue, the same record fails the same way
    queue = load(spark, store, verifyCrc="true").filter(f"topic = '{victim.topic}' AND queue_id = {victim.queue_id}")
    with pytest.raises(Exception, match=rf"commitlog offset {victim.phys_offset} .*damaged: body CRC"):
        queue.count()


def test_torn_tail_of_a_live_store_is_not_read(spark: Any, store_dir: Path, tmp_path: Path) -> None:
    """A record half-written at the end of the newest file (a broker's append in progress, or a
    crash) ends the data: never a row, never an error."""
    store = _copy(store_dir, tmp_path)
    last = engine_records(store)[-1]
    newest = sorted((store / "commitlog").iterdir())[-1]
    data = bytearray(newest.read_bytes())
    end = last.phys_offset + last.size - int(newest.name)
    torn = data[last.phys_offset - int(newest.name):end]
    struct.pack_into(">q", torn, 28, last.phys_offset + last.size)  # as the writer would stamp it
    data[end:end + len(torn) - 30] = torn[:-30]  # all but its tail (and the whole-record CRC)
    newest.write_bytes(bytes(data))
    for verify in ("false", "true"):
        rows = spark.read.format("mqstore").option("verifyCrc", verify).load(str(store)).select("phys_offset")
        assert rows.count() == STORE_MESSAGES


def test_not_a_store_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="is not a message store"):
        spark.read.format("mqstore").load(str(tmp_path)).count()


@pytest.mark.xfail(strict=True, reason="Spark 4.3.0 stores the read planned during filter pushdown on the "
                   "provider-scoped PythonDataSourceV2 (setReadInfo): a later scan of the same loaded DataFrame "
                   "with no pushable filter reads with the filtered plan. Fixed upstream (PythonScanBuilder keeps "
                   "readInfo per scan); when this passes, drop the fresh-load() advice in mqstore.pipeline.datasource.")
def test_spark_reuses_a_filtered_read_plan(spark: Any, store_dir: Path) -> None:
    df = load(spark, store_dir)
    assert df.filter("queue_id = 1").count() == STORE_MESSAGES // 4
    assert df.count() == STORE_MESSAGES
