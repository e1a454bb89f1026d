"""The Spark source and sink next to the stock RocketMQ client: what the client sends through the
remoting front is a row like any other, and rows Spark writes to the broker reach the client."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import pytest

from mqstore.scripts.bench.rocketmq_peer import body_of
from tests.integration.broker import Broker, free_port_range, wait_for

pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")


@pytest.mark.slow
def test_spark_reads_what_the_stock_client_sent_and_the_client_reads_what_spark_wrote(spark: Any,
                                                                                       tmp_path: Path) -> None:
    from tests.integration.test_remoting import peer
    port = free_port_range(1)
    ns = f"127.0.0.1:{port}"
    with Broker(tmp_path, remoting_port=port, commitlog=1024 * 1024, cq=4096) as broker:
        sent = peer(tmp_path, "produce", ns, "FromClient", 200, "--big-every", 40)
        rows = wait_for(lambda: (r := spark.read.format("mqstore").load(str(broker.store))
                                 .filter("topic = 'FromClient'").toArrow().to_pylist()) and len(r) == 200 and r,
                        30, "the client's 200 messages in the store")
        by_uniq = {r["uniq_key"]: r for r in rows}
        for s in sent:
            row = by_uniq[s["msg_id"]]
            # the table holds records as stored: compressed bodies stay compressed, marked in sys_flag
            body = zlib.decompress(row["body"]) if row["sys_flag"] & 1 else row["body"]
            assert (body, row["keys"], row["tags"]) == (body_of(s["i"], 40), [f"key-{s['i']}"], f"Tag{s['i'] % 3}")
        assert sum(r["sys_flag"] & 1 for r in rows) == 5  # every 40th body was over 4 KiB

        written = [("FromSpark", f"spark-{i}".encode(), "TagS", [f"key-{i}"]) for i in range(100)]
        spark.createDataFrame(written, "topic STRING, body BINARY, tags STRING, keys ARRAY<STRING>") \
            .write.format("mqstore").option("broker", str(broker.store)).mode("append").save()
        pulled = wait_for(lambda: len(got := peer(tmp_path, "pull", ns, "FromSpark", "CG_spark")) >= 100 and got, 30,
                          "the rows Spark wrote to be consumable")
    assert sorted((m["keys"], m["tags"]) for m in pulled) == sorted((f"key-{i}", "TagS") for i in range(100))
    assert len({m["id"] for m in pulled}) == 100
