"""Spark read throughput of the mqstore data source on local[2]: Arrow batches vs tuples, one run.

    python -m scripts.bench.spark_read [--messages 200000] [--rounds 3]

Builds a store with the embedded MessageStore (128-byte bodies, tags, keys on 10 %), then times, warm,
a full materialisation (``write.format("noop")``) and an aggregate (count, sum of sizes, max offset)
for each mode, best of ``--rounds``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from engine import Geometry, Message, MessageStore, StoreConfig
from pipeline.session import spark_session


def build_store(path: Path, messages: int) -> None:
    config = StoreConfig(geometry=Geometry(commitlog_file_size=32 * 1024 * 1024))
    with MessageStore.open(path, config) as store:
        body = os.urandom(128)
        for start in range(0, messages, 1000):
            store.put_batch([Message("Bench", body, tags="TagA" if i % 2 else "TagB",
                                     keys=(f"k{i}",) if i % 10 == 0 else ())
                             for i in range(start, min(messages, start + 1000))], queue_id=start // 1000 % 4)


def timed(spark: Any, store: Path, arrow: bool, action: str, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        df = spark.read.format("mqstore").option("arrow", str(arrow).lower()).load(str(store))
        start = time.perf_counter()
        if action == "noop":
            df.write.format("noop").mode("overwrite").save()
        else:
            df.selectExpr("count(*)", "sum(size)", "max(queue_offset)").collect()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mqstore-spark-read-"))
    try:
        build_store(root / "store", args.messages)
        spark = spark_session("local[2]", "bench-read", **{"spark.sql.shuffle.partitions": "2"})
        timed(spark, root / "store", True, "agg", 1)  # warm-up: JIT, Python daemon
        results = {}
        for arrow in (True, False):
            for action in ("noop", "agg"):
                seconds = timed(spark, root / "store", arrow, action, args.rounds)
                results[f"{'arrow' if arrow else 'tuples'}_{action}"] = {
                    "seconds": round(seconds, 3), "rows_per_s": round(args.messages / seconds)}
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = results["arrow_noop"]["rows_per_s"] / results["tuples_noop"]["rows_per_s"]
    print(json.dumps({"benchmark": "spark_read", "master": "local[2]", "cpus": os.cpu_count(),
                      "messages": args.messages, "runs": results, "arrow_over_tuples_noop": round(ratio, 2)},
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
