"""The data source on a session the project did not build: ``SparkSession.builder...getOrCreate()``
as spark-submit, a notebook or a cluster gives it, then ``spark.dataSource.register``.

Spark holds one SparkContext per process and the suite's ``spark`` fixture already has it, so the
plain session lives in a subprocess of its own (one session start, a few seconds)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.conftest import STORE_MESSAGES, worker_env
from tests.pipeline.test_datasource_read import engine_records

pytestmark = pytest.mark.spark

WHERE = "topic = 'Orders' AND queue_id = 1 AND queue_offset >= 10 AND queue_offset < 30"

PLAIN_SESSION = f"""
import json, sys
from pyspark.sql import SparkSession
from mqstore.pipeline.datasource import MqstoreDataSource

store = sys.argv[1]
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
spark.dataSource.register(MqstoreDataSource)
out = {{"default_pushdown": spark.conf.get("spark.sql.python.filterPushdown.enabled"),
        "count": spark.read.format("mqstore").load(store).count()}}
for label, pushdown in (("default", None), ("pushdown", "true")):
    if pushdown:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", pushdown)
    df = spark.read.format("mqstore").load(store).where({WHERE!r})
    out[label] = {{"phys_offsets": sorted(r.phys_offset for r in df.select("phys_offset").collect()),
                  "plan": df._jdf.queryExecution().executedPlan().toString(),
                  "partitions": df.rdd.getNumPartitions()}}
spark.stop()
print(json.dumps(out))
"""


def residual_filter(plan: str) -> str:
    """The Filter node Spark kept above the scan ("" when it kept none)."""
    return next((line for line in plan.splitlines() if "Filter" in line and "BatchScan" not in line), "")


def test_reads_on_a_plain_session_with_pushdown_off_or_on(store_dir: Path) -> None:
    """Regression: on a session without the project's helper the read failed with
    DATA_SOURCE_PUSHDOWN_DISABLED ('spark.sql.python.filterPushdown.enabled' is false)."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    proc = subprocess.run([sys.executable, "-c", PLAIN_SESSION, str(store_dir)], env=worker_env(os.environ),
                          capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    expected = [r.phys_offset for r in engine_records(store_dir)
                if r.topic == "Orders" and r.queue_id == 1 and 10 <= r.queue_offset < 30]
    assert expected and out["count"] == STORE_MESSAGES
    assert out["default_pushdown"] == "false"  # Spark 4.3's default: the case users meet

    # pushdown off: a plain scan of every file, Spark applies every filter itself
    default = out["default"]
    assert default["phys_offsets"] == expected
    assert all(f"{column}#" in residual_filter(default["plan"]) for column in ("topic", "queue_id", "queue_offset"))
    assert default["partitions"] > 1

    # pushdown on, in the same user session: the source takes the filters and reads one queue slice
    pushed = out["pushdown"]
    assert pushed["phys_offsets"] == expected
    assert residual_filter(pushed["plan"]) == ""
    assert pushed["partitions"] == 1
