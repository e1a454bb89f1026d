"""Spark read throughput of the mqstore data source on local[2]: Arrow batches vs tuples vs Spark's own
Parquet read of the same rows, one session, one run.

    python -m mqstore.scripts.bench.spark_read [--messages 200000] [--rounds 3] [--no-tuples] [--dir DIR]

Builds a store with the embedded MessageStore (128-byte bodies, tags, keys on 10 %), writes the data
source's rows once to Parquet (snappy, Spark's default) beside it, then times, warm, a full
materialisation (``write.format("noop")``) and an aggregate (count, sum of sizes, max offset) for
each reader, best of ``--rounds``, with the CPU time of Spark's processes (JVM, Python workers) per
row: every column (``arrow``, ``tuples``, ``parquet``), and only the aggregate's two columns
(``arrow_pruned``: the data source given the schema ``AGG_SCHEMA``; ``parquet_pruned``: Parquet's
``select`` of the same columns). Prints one JSON object; ``arrow_over_parquet_*`` is the data source's
Arrow read over Parquet's, ``pruned_over_parquet_*`` the same on the two columns (1.0 or more: at
least as fast).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from mqstore.engine import Geometry, Message, MessageStore, StoreConfig
from mqstore.pipeline.session import spark_session

ACTIONS = ("noop", "agg")
AGG_COLUMNS = ("size", "queue_offset")
AGG_SCHEMA = "size INT, queue_offset BIGINT"  # the aggregate's columns, as the data source is told them


def build_store(path: Path, messages: int) -> None:
    config = StoreConfig(geometry=Geometry(commitlog_file_size=32 * 1024 * 1024))
    with MessageStore.open(path, config) as store:
        body = os.urandom(128)
        for start in range(0, messages, 1000):
            store.put_batch([Message("Bench", body, tags="TagA" if i % 2 else "TagB",
                                     keys=(f"k{i}",) if i % 10 == 0 else ())
                             for i in range(start, min(messages, start + 1000))], queue_id=start // 1000 % 4)


def spark_cpu_s(spark: Any) -> float:
    """CPU seconds of Spark's JVM and every process under it (the Python daemon and its workers): on a
    shared, busy machine a steadier measure than the wall clock."""
    jvm = psutil.Process(spark.sparkContext._gateway.proc.pid)
    total = 0.0
    for proc in (jvm, *jvm.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def timed(spark: Any, load: Callable[[], Any], action: str, rounds: int) -> tuple[float, float]:
    """Best of ``rounds`` (seconds, Spark's CPU seconds) of ``action`` on a freshly loaded DataFrame."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(rounds):
        df = load()
        start, cpu = time.perf_counter(), spark_cpu_s(spark)
        if action == "noop":
            df.write.format("noop").mode("overwrite").save()
        else:
            df.selectExpr("count(*)", "sum(size)", "max(queue_offset)").collect()
        best, best_cpu = min(best, time.perf_counter() - start), min(best_cpu, spark_cpu_s(spark) - cpu)
    return best, best_cpu


def measure(spark: Any, work: Path, messages: int, rounds: int, *, tuples: bool = True) -> dict[str, Any]:
    """The readers timed on one store of ``messages`` built under ``work``; the session is the caller's."""
    store, parquet = work / "store", work / "parquet"
    build_store(store, messages)

    def mqstore(arrow: bool, schema: str | None = None) -> Callable[[], Any]:
        def load() -> Any:
            read = spark.read.format("mqstore").option("arrow", str(arrow).lower())
            return (read.schema(schema) if schema else read).load(str(store))
        return load

    readers: dict[str, Callable[[], Any]] = {"arrow": mqstore(True), **({"tuples": mqstore(False)} if tuples else {}),
               "parquet": lambda: spark.read.parquet(str(parquet)),
               "arrow_pruned": mqstore(True, AGG_SCHEMA),
               "parquet_pruned": lambda: spark.read.parquet(str(parquet)).select(*AGG_COLUMNS)}
    readers["arrow"]().write.parquet(str(parquet))  # the same rows, in Spark's own format
    for warm in ("arrow", "parquet", "arrow_pruned"):  # warm-up: JIT, Python daemon and workers
        timed(spark, readers[warm], "agg", 1)
    runs = {}
    for reader, load in readers.items():
        for action in ACTIONS:
            seconds, cpu_s = timed(spark, load, action, rounds)
            runs[f"{reader}_{action}"] = {"seconds": round(seconds, 3), "rows_per_s": round(messages / seconds),
                                          "cpu_us_per_row": round(cpu_s * 1e6 / messages, 2)}
    parquet_bytes = sum(p.stat().st_size for p in parquet.rglob("*.parquet"))
    out: dict[str, Any] = {"messages": messages, "rounds": rounds, "parquet_bytes": parquet_bytes, "runs": runs}
    for action in ACTIONS:
        for ours, theirs, ratio in (("arrow", "parquet", "arrow_over_parquet"),
                                    ("arrow_pruned", "parquet_pruned", "pruned_over_parquet")):
            out[f"{ratio}_{action}"] = round(
                runs[f"{ours}_{action}"]["rows_per_s"] / runs[f"{theirs}_{action}"]["rows_per_s"], 2)
    if tuples:
        out["arrow_over_tuples_noop"] = round(runs["arrow_noop"]["rows_per_s"] / runs["tuples_noop"]["rows_per_s"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-tuples", dest="tuples", action="store_false", help="skip the tuple reader")
    parser.add_argument("--dir", type=Path, default=None, help="where the store goes (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mqstore-spark-read-", dir=args.dir))
    try:
        spark = spark_session("local[2]", "bench-read", **{"spark.sql.shuffle.partitions": "2"})
        try:
            result = measure(spark, root, args.messages, args.rounds, tuples=args.tuples)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"benchmark": "spark_read", "master": "local[2]", "cpus": os.cpu_count(), **result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
