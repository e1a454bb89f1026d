"""``df.write.format("mqstore")``: rows go to a running broker, never into store files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker import Broker, wait_for

pytestmark = pytest.mark.spark

MESSAGE_DDL = ("topic STRING, body BINARY, tags STRING, keys ARRAY<STRING>, properties MAP<STRING, STRING>, "
               "queue_id INT, note STRING")


def message_view(row: dict[str, Any]) -> tuple[Any, ...]:
    props = {k: v for k, v in dict(row["properties"]).items() if k not in ("UNIQ_KEY",)}
    return (row["topic"], row["queue_id"], bytes(row["body"]), row["tags"], tuple(row["keys"]),
            tuple(sorted(props.items())))


_streamed: dict[Path, int] = {}


def streamed_count(spark: Any, store: Path, checkpoint: Path) -> int:
    """Rows an availableNow stream over ``store`` has delivered so far on ``checkpoint`` (a run
    adds what is new since the last)."""
    def count(df: Any, batch_id: int) -> None:
        _streamed[checkpoint] = _streamed.get(checkpoint, 0) + df.count()

    query = (spark.readStream.format("mqstore").load(str(store)).writeStream.foreachBatch(count)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(60)
    return _streamed.get(checkpoint, 0)


def sent_view(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a row of MESSAGE_DDL becomes once stored: tags and keys are properties too."""
    topic, body, tags, keys, props, queue_id, _ = row
    stored = dict(props or {})
    if tags:
        stored["TAGS"] = tags
    if keys:
        stored["KEYS"] = " ".join(keys)
    return topic, queue_id, body, tags, tuple(keys or ()), tuple(sorted(stored.items()))


def test_rows_sent_through_a_broker_come_back(spark: Any, store_dir: Path, tmp_path: Path) -> None:
    rows = [("Made", b"m-%d" % i, f"t{i % 2}" if i % 3 else None, [f"key{i}"] if i % 2 else None,
             {"n": str(i)} if i % 4 else None, i % 2, "ignored") for i in range(40)]
    made = spark.createDataFrame(rows, MESSAGE_DDL)
    # a DataFrame read from another store carries every reader column: the extra ones are ignored
    audit = spark.read.format("mqstore").load(str(store_dir)).filter("topic = 'Audit'")
    broker = Broker(tmp_path, commitlog=64 * 1024, cq=256)
    with broker:
        made.write.format("mqstore").option("broker", str(broker.store)).mode("append").save()
        audit.write.format("mqstore").option("broker", str(broker.store)).option("batchSize", "64") \
            .mode("append").save()
        # the live store reads too (read-only): every acknowledged record is in its commitlog, and
        # the stream sees them once the broker's builder has published their queue entries
        assert spark.read.format("mqstore").load(str(broker.store)).count() == 40 + 1000
        streamed = wait_for(lambda: streamed_count(spark, broker.store, tmp_path / "ck") == 40 + 1000, 30,
                            "the live store's consume queues to cover every message")
        assert streamed
        assert broker.stop() == 0

    back = spark.read.format("mqstore").load(str(broker.store)).toArrow().to_pylist()
    source = spark.read.format("mqstore").load(str(store_dir)).filter("topic = 'Audit'").toArrow().to_pylist()
    got = Counter(message_view(r) for r in back)
    assert Counter({k: n for k, n in got.items() if k[0] == "Made"}) == Counter(sent_view(row) for row in rows)
    assert Counter({k: n for k, n in got.items() if k[0] == "Audit"}) == Counter(message_view(r) for r in source)
    # the copies keep their UNIQ_KEY (the client-side message id)
    assert sorted(r["uniq_key"] for r in back if r["topic"] == "Audit") == sorted(r["uniq_key"] for r in source)


def test_messages_the_broker_refuses_fail_the_write(spark: Any, tmp_path: Path) -> None:
    rows = [("Good", b"ok", None, None, None, 0, ""), ("Good", b"bad queue", None, None, None, 9, ""),
            ("Good", None, None, None, None, 1, "")]
    with Broker(tmp_path, commitlog=64 * 1024, cq=256) as broker:
        df = spark.createDataFrame(rows, MESSAGE_DDL).coalesce(1)
        with pytest.raises(Exception, match=r"2 of 3 messages were not sent: .*queue id 9 out of range"):
            df.write.format("mqstore").option("broker", str(broker.store)).mode("append").save()
        broker.stop()
    back = spark.read.format("mqstore").load(str(broker.store)).select("topic", "body").collect()
    assert [(r.topic, bytes(r.body)) for r in back] == [("Good", b"ok")]  # what was acknowledged stays


def test_writing_needs_a_running_broker(spark: Any, store_dir: Path) -> None:
    df = spark.createDataFrame([("T", b"x")], "topic STRING, body BINARY")
    with pytest.raises(Exception, match="no broker is running for"):
        df.write.format("mqstore").option("broker", str(store_dir)).mode("append").save()
    with pytest.raises(Exception, match=r"give \.option\('broker', store_dir\)"):
        df.write.format("mqstore").mode("append").save(str(store_dir))
    with pytest.raises(Exception, match="append-only message log"):
        df.write.format("mqstore").option("broker", str(store_dir)).mode("overwrite").save()
    with pytest.raises(Exception, match="needs a 'body' column"):
        spark.createDataFrame([("T",)], "topic STRING").write.format("mqstore") \
            .option("broker", str(store_dir)).mode("append").save()
