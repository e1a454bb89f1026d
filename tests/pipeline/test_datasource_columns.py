"""``spark.read.format("mqstore").schema(...)``: a schema naming some of the columns makes the reader
decode and ship only those, with the same values as the full read; one it cannot give is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.test_datasource_read import engine_records, executed_plan, expected_row, filter_node

pytestmark = pytest.mark.spark

PICKED = "body BINARY, Topic STRING, properties MAP<STRING, STRING>, phys_offset BIGINT, store_timestamp TIMESTAMP"


def picked_rows(df: Any) -> list[dict[str, Any]]:
    rows = df.toArrow().to_pylist()
    for row in rows:
        row["properties"] = dict(row["properties"])
    return sorted(rows, key=lambda row: row["phys_offset"])


def expected_picked(records: list[Any]) -> list[dict[str, Any]]:
    out = []
    for r in records:
        row = expected_row(r)
        out.append({"body": row["body"], "Topic": row["topic"], "properties": row["properties"],
                    "phys_offset": row["phys_offset"], "store_timestamp": row["store_timestamp"]})
    return out


def test_a_schema_picks_columns_in_its_order(spark: Any, store_dir: Path) -> None:
    df = spark.read.format("mqstore").schema(PICKED).load(str(store_dir))
    assert df.columns == ["body", "Topic", "properties", "phys_offset", "store_timestamp"]
    assert picked_rows(df) == expected_picked(engine_records(store_dir))
    tuples = spark.read.format("mqstore").option("arrow", "false").schema(PICKED).load(str(store_dir))
    assert picked_rows(tuples) == picked_rows(df)


def test_filters_and_the_topics_option_hold_on_a_picked_schema(spark: Any, store_dir: Path) -> None:
    records = engine_records(store_dir)
    df = spark.read.format("mqstore").schema(PICKED).load(str(store_dir)) \
        .filter("Topic = 'Orders' AND phys_offset >= 20000")
    assert filter_node(executed_plan(df)) == ""  # both consumed by the reader
    assert picked_rows(df) == expected_picked([r for r in records if r.topic == "Orders" and r.phys_offset >= 20000])
    # the topic column is not read, yet the topics option still selects by it
    sizes = spark.read.format("mqstore").option("topics", "Audit").schema("size INT, queue_id INT") \
        .load(str(store_dir)).groupBy("queue_id").sum("size").collect()
    assert {row[0]: row[1] for row in sizes} == {
        q: sum(r.size for r in records if r.topic == "Audit" and r.queue_id == q) for q in range(4)}


@pytest.mark.parametrize(("schema", "message"), [
    ("topic STRING, nope INT", "mqstore has no column 'nope'"),
    ("size BIGINT", "column 'size' is int in mqstore, not bigint"),
    ("tags STRING NOT NULL", "column 'tags' can be null"),
])
def test_a_schema_the_table_cannot_give_is_a_clear_error(spark: Any, store_dir: Path, schema: str,
                                                         message: str) -> None:
    with pytest.raises(Exception, match=message):
        spark.read.format("mqstore").schema(schema).load(str(store_dir)).collect()


def test_a_stream_reads_the_columns_its_schema_picks(spark: Any, store_dir: Path, tmp_path: Path) -> None:
    rows: list[tuple[str, int]] = []

    def collect(df: Any, batch_id: int) -> None:
        assert df.columns == ["queue_offset", "topic"]
        rows.extend((r.topic, r.queue_offset) for r in df.collect())

    query = (spark.readStream.format("mqstore").schema("queue_offset BIGINT, topic STRING").load(str(store_dir))
             .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None
    assert sorted(rows) == sorted((r.topic, r.queue_offset) for r in engine_records(store_dir))
