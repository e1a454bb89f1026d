"""The vectorised decoder against ``mqstore.engine.log.record.decode_record``: same rows, same verdicts.

No Spark here (pyarrow and numpy only), so these run in the fast loop too.
"""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from mqstore.engine.config import Geometry  # after the importorskip
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import DecodeKind, Record, decode_record, encode_record, seal_record
from mqstore.pipeline.columns import records_to_batch, to_batch
from mqstore.pipeline.options import Pushdown
from mqstore.pipeline.plan import ScanPartition
from mqstore.pipeline.record_layout import RecordLayout
from mqstore.pipeline.scan import ReadContext, scan_range
from mqstore.pipeline.schema import COLUMNS, FULL, Projection, ProjectionError

V4, V6 = Host("10.0.0.7", 4000), Host("2001:db8::1", 10911)


def record(i: int, *, topic: str = "T", props: dict[str, str] | None = None, prop_crc: bool = False,
           store_host: Host = V4, body: bytes | None = None, store_ms: int | None = None) -> bytearray:
    out = encode_record(topic=topic, body=b"b%d" % i * (i % 5) if body is None else body,
                        properties={"UNIQ_KEY": f"U{i}", **(props or {})}, queue_id=i % 3, flag=i, sys_flag=0,
                        born_ms=1_700_000_000_000 + i, born_host=V6 if i % 2 else V4, store_host=store_host,
                        store_ms=1_700_000_000_500 + i if store_ms is None else store_ms, queue_offset=i,
                        phys_offset=1000 * i, reconsume_times=i % 2,
                        prepared_tx_offset=7 * i, prop_crc=prop_crc)
    if prop_crc:
        seal_record(out, 0, len(out))
    return out


def decode_all(data: bytes, starts: list[int]) -> list[Record]:
    out = []
    for s in starts:
        decoded = decode_record(data, s, check_crc=False)
        assert decoded.record is not None
        out.append(decoded.record)
    return out


def layout_of(records: list[bytearray]) -> tuple[np.ndarray, list[int]]:
    data = b"".join(records)
    starts = list(np.cumsum([0] + [len(r) for r in records[:-1]]))
    return np.frombuffer(data, dtype=np.uint8), [int(s) for s in starts]


def test_fast_path_equals_the_record_decoder() -> None:
    recs = [record(i, topic="T" * (200 if i == 5 else 1 + i % 3),  # a v2 record: 2-byte topic length
                   props={"TAGS": f"tag{i}", "KEYS": " k1  k2 " if i % 2 else f"only{i}", "x\x01y": "z"}
                   if i % 3 else {}, prop_crc=i % 4 == 0, store_host=V6 if i % 5 == 0 else V4,
                   body=b"" if i == 7 else None) for i in range(40)]
    buf, starts = layout_of(recs)
    layout = RecordLayout.of(buf, np.array(starts))
    assert layout.valid_count == len(recs)
    batch = to_batch(buf, layout)
    assert batch is not None
    expected = records_to_batch(decode_all(buf.tobytes(), starts))
    assert batch.to_pylist() == expected.to_pylist()
    assert batch.equals(expected)
    assert all("__CRC32#" not in dict(row["properties"]) for row in batch.to_pylist())
    assert to_batch(buf, layout, read_body=False).column("body").null_count == len(recs)


@pytest.mark.parametrize("patch", ["non-utf8 value", "repeated name", "crc name in a value"])
def test_text_the_fast_path_cannot_reproduce_goes_to_the_record_decoder(patch: str) -> None:
    raw = record(3, props={"aa": "ZZ", "bb": "QQ"})
    if patch == "non-utf8 value":
        raw = bytearray(bytes(raw).replace(b"ZZ", b"\xff\xfe"))
    elif patch == "repeated name":
        raw = bytearray(bytes(raw).replace(b"bb\x01QQ", b"aa\x01QQ"))
    recs = [record(1), raw, record(2)]
    buf, starts = layout_of(recs)
    layout = RecordLayout.of(buf, np.array(starts))
    assert layout.valid_count == 3
    if patch == "crc name in a value":
        assert to_batch(buf, layout) is not None
        return
    assert to_batch(buf, layout) is None  # the caller then builds the batch from decode_record's Records
    props = decode_all(buf.tobytes(), starts)[1].properties
    assert props["aa"] == ("\ufffd\ufffd" if patch == "non-utf8 value" else "QQ")


def test_damaged_records_get_the_record_decoders_verdict() -> None:
    """Flip bytes of single records at random: the layout check (plus the topic check) calls a
    record valid exactly when decode_record does, and the CRC check agrees with check_crc=True."""
    rng = random.Random(20240611)
    for trial in range(600):
        prop_crc = trial % 2 == 0
        raw = record(trial, topic=f"Topic{trial % 7}", props={"TAGS": "t", "k": "v" * (trial % 9)},
                     prop_crc=prop_crc, body=bytes(rng.randrange(256) for _ in range(trial % 23)))
        for _ in range(1 + trial % 3):
            pos = rng.randrange(len(raw))
            raw[pos] = rng.randrange(256) if trial % 5 else raw[pos] ^ 0x80
        if trial % 11 == 0:
            raw = raw[:rng.randrange(8, len(raw))]  # torn
        buf = np.frombuffer(bytes(raw) + bytes(64), dtype=np.uint8)
        layout = RecordLayout.of(buf, np.array([0]), limit=len(raw))
        structure_ok = layout.valid_count == 1 and layout.first_bad_topic(buf) == 1
        plain = decode_record(bytes(raw), 0, check_crc=False)
        assert structure_ok == (plain.kind is DecodeKind.RECORD), (trial, plain.reason, layout.reason)
        if structure_ok:
            crc_ok = layout.first_crc_failure(buf, require_prop_crc=prop_crc)[0] == 1
            strict = decode_record(bytes(raw), 0, check_crc=True, require_prop_crc=prop_crc)
            assert crc_ok == (strict.kind is DecodeKind.RECORD), (trial, strict.reason)
            batch = to_batch(buf, layout)
            if batch is not None:
                assert batch.equals(records_to_batch([plain.record]))  # type: ignore[list-item]


@pytest.mark.parametrize("batch_rows", [2, 100])
def test_scan_hands_a_record_only_the_decoder_can_judge_to_it(tmp_path: Path, batch_rows: int) -> None:
    """``__CRC32#`` inside a property value of an unsealed record: the scan kernel defers the CRC verdict,
    the exact decoder accepts the record, and the scan goes on past it (every CRC is checked in the
    newest file)."""
    recs = [record(i, props={"x": "a__CRC32#b"} if i == 2 else None, prop_crc=i != 2) for i in range(5)]
    data = b"".join(recs) + bytes(64)
    path = tmp_path / "00000000000000000000"
    path.write_bytes(data)
    starts = [int(s) for s in np.cumsum([0] + [len(r) for r in recs[:-1]])]
    assert decode_record(data, starts[2], check_crc=True).kind is DecodeKind.RECORD
    ctx = ReadContext(str(tmp_path), Geometry(prop_crc=False), Pushdown(), include_body=True, verify_crc=True,
                      batch_rows=batch_rows)
    part = ScanPartition(str(path), 0, 0, len(data), newest=True)
    rows = [row for batch in scan_range(part, ctx) for row in batch.to_pylist()]
    assert rows == records_to_batch(decode_all(data, starts)).to_pylist()


def projection(fields: list[tuple[str, Any]]) -> Projection:
    """The projection of a schema of these (name, Spark type) fields; type None: the table's own, as
    the README lists it."""
    from pyspark.sql import types as t

    table = {"topic": t.StringType(), "queue_id": t.IntegerType(), "queue_offset": t.LongType(),
             "phys_offset": t.LongType(), "size": t.IntegerType(), "flag": t.IntegerType(),
             "sys_flag": t.IntegerType(), "body_crc": t.IntegerType(), "tags": t.StringType(),
             "keys": t.ArrayType(t.StringType()), "properties": t.MapType(t.StringType(), t.StringType()),
             "body": t.BinaryType(), "born_timestamp": t.TimestampType(), "born_host": t.StringType(),
             "store_timestamp": t.TimestampType(), "store_host": t.StringType(), "reconsume_times": t.IntegerType(),
             "prepared_tx_offset": t.LongType(), "msg_id": t.StringType(), "uniq_key": t.StringType()}
    assert list(table) == [name for name, _, _ in COLUMNS]
    return Projection.of(t.StructType([t.StructField(name, data_type or table[name.lower()])
                                       for name, data_type in fields]))


MIXED = [record(i, topic="T" * (1 + i % 3), props={"TAGS": f"tag{i}", "KEYS": f"k{i} x"} if i % 3 else {},
                store_host=V6 if i % 5 == 0 else V4) for i in range(30)]


@settings(max_examples=60, deadline=None)
@given(st.permutations([name for name, _, _ in COLUMNS]).flatmap(
    lambda names: st.integers(1, len(names)).map(lambda k: names[:k])), st.booleans())
def test_a_projection_yields_the_full_batchs_columns(names: list[str], upper: bool) -> None:
    """Any subset of the columns, in any order, under names in another case: the full batch's columns."""
    buf, starts = layout_of(MIXED)
    layout = RecordLayout.of(buf, np.array(starts))
    wanted = projection([(n.upper() if upper else n, None) for n in names])
    full = to_batch(buf, layout)
    pruned = to_batch(buf, layout, projection=wanted)
    assert full is not None and pruned is not None
    assert pruned.schema.names == [n.upper() if upper else n for n in names]
    for i, name in enumerate(names):
        assert pruned.column(i).equals(full.column(name))
    exact = records_to_batch(decode_all(buf.tobytes(), starts), projection=wanted)
    assert exact.equals(pruned)


def test_a_projection_without_properties_needs_no_exact_decoder() -> None:
    raw = bytearray(bytes(record(3, props={"aa": "ZZ", "bb": "QQ"})).replace(b"bb\x01QQ", b"aa\x01QQ"))
    buf, starts = layout_of([record(1), raw])
    layout = RecordLayout.of(buf, np.array(starts))
    assert to_batch(buf, layout) is None
    pruned = to_batch(buf, layout, projection=projection([("size", None), ("body", None)]))
    assert pruned is not None and pruned.column("size").to_pylist() == [len(record(1)), len(raw)]


@pytest.mark.parametrize(("fields", "message"), [
    ([("nope", "string")], "mqstore has no column 'nope'"),
    ([("size", "bigint")], "column 'size' is int in mqstore, not bigint"),
    ([("keys", "map")], "column 'keys' is array<string> in mqstore, not map<string,string>"),
    ([("keys", "array<int>")], "column 'keys' is array<string> in mqstore, not array<int>"),
    ([("topic", None), ("TOPIC", None)], "names column 'topic' twice"),
    ([], "names no column"),
])
def test_a_schema_the_table_cannot_give_is_a_clear_error(fields: list[tuple[str, str | None]], message: str) -> None:
    from pyspark.sql import types as t

    spark_types = {"string": t.StringType(), "bigint": t.LongType(), "map": t.MapType(t.StringType(), t.StringType()),
                   "array<int>": t.ArrayType(t.IntegerType()), None: None}
    with pytest.raises(ProjectionError, match=message):
        projection([(name, spark_types[kind]) for name, kind in fields])


def test_a_not_null_column_that_can_be_null_is_refused() -> None:
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType

    assert Projection.of(StructType([StructField("size", IntegerType(), nullable=False)])).columns == ("size",)
    with pytest.raises(ProjectionError, match="'tags' can be null"):
        Projection.of(StructType([StructField("tags", StringType(), nullable=False)]))
    # a damaged record's milliseconds may be no timestamp at all: the column is null there
    with pytest.raises(ProjectionError, match="'store_timestamp' can be null"):
        Projection.of(StructType([StructField("store_timestamp", TimestampType(), nullable=False)]))


def test_topic_filter_holds_when_the_topic_column_is_not_read(tmp_path: Path) -> None:
    recs = [record(i, topic=("A", "B", "C")[i % 3]) for i in range(12)]
    data = b"".join(recs) + bytes(64)
    path = tmp_path / "00000000000000000000"
    path.write_bytes(data)
    ctx = ReadContext(str(tmp_path), Geometry(prop_crc=False), Pushdown(topics=frozenset({"A", "C"})),
                      include_body=True, verify_crc=False, batch_rows=5,
                      projection=projection([("queue_offset", None)]))
    part = ScanPartition(str(path), 0, 0, len(data), newest=False)
    offsets = [row["queue_offset"] for batch in scan_range(part, ctx) for row in batch.to_pylist()]
    assert offsets == [i for i in range(12) if i % 3 != 1]


def test_is_not_null_is_consumed_only_where_every_row_has_a_value() -> None:
    from pyspark.sql.datasource import IsNotNull

    pushdown = Pushdown()
    assert pushdown.accept(IsNotNull(("topic",))) is pushdown
    assert pushdown.accept(IsNotNull(("tags",))) is None
    # a damaged record's milliseconds may be no timestamp: Spark keeps the filter on born_timestamp, and
    # the reader's mask drops store_timestamp's nulls (below)
    assert pushdown.accept(IsNotNull(("born_timestamp",))) is None
    assert pushdown.accept(IsNotNull(("store_timestamp",))) is not None


def test_a_store_timestamp_filter_drops_a_record_whose_timestamp_is_null(tmp_path: Path) -> None:
    from pyspark.sql.datasource import IsNotNull, LessThan

    recs = [record(0), record(1, store_ms=1 << 62), record(2)]  # 1 << 62 ms is no timestamp: null there
    data = b"".join(recs) + bytes(64)
    path = tmp_path / "00000000000000000000"
    path.write_bytes(data)
    part = ScanPartition(str(path), 0, 0, len(data), newest=False)

    def rows(pushdown: Pushdown) -> list[dict[str, Any]]:
        ctx = ReadContext(str(tmp_path), Geometry(prop_crc=False), pushdown, include_body=True, verify_crc=False,
                          batch_rows=5, projection=FULL)
        return [row for batch in scan_range(part, ctx) for row in batch.to_pylist()]

    everything = rows(Pushdown())
    assert [row["store_timestamp"] is None for row in everything] == [False, True, False]
    for f in (IsNotNull(("store_timestamp",)), LessThan(("store_timestamp",), datetime.max)):
        pushdown = Pushdown().accept(f)
        assert pushdown is not None
        assert [row["queue_offset"] for row in rows(pushdown)] == [0, 2]
