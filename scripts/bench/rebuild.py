"""The Spark rebuild of consume queues and index files next to the engine's own, on one store, in one run.

    python -m mqstore.scripts.bench.rebuild [--count 1000000] [--master local[2]] [--dir DIR] [--split-bytes N]

Builds a store of COUNT messages with ``MessageStore.put_batch`` in the default geometry (1 GiB
commitlog files, 300,000-entry consume-queue files, 5M-slot index files): 4 topics x 4 queues,
128-byte bodies, a tag and a key on every message (so two index entries each, with UNIQ_KEY). Then,
on that store, one after the other:

1. ``engine``: ``mqstore.engine.repair.rebuild.rebuild_derived`` with the derived files in place (the open before it
   has nothing to recover; the rebuild deletes and re-dispatches everything);
2. ``engine_after_delete``: the same after deleting ``consumequeue/`` and ``index/``, the job's own
   starting point (the open's recovery re-dispatches everything once already, the rebuild again);
3. ``spark``: ``mqstore.pipeline.rebuild_job.rebuild`` after deleting ``consumequeue/`` and ``index/``, with the
   session started beforehand (its start is reported on its own).

Each result is compared with the store's original derived files (consume-queue files byte for byte,
index files' contents in name order). Prints one JSON object; the load average shows how busy the
machine was.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mqstore.engine import Message, MessageStore
from mqstore.engine.read.store_files import index_paths
from mqstore.engine.repair.rebuild import rebuild_derived
from mqstore.pipeline.commitlog_ranges import DEFAULT_SPLIT_BYTES

TOPICS = 4
QUEUES = 4
BATCH = 1000
BODY = b"b" * 128
T = TypeVar("T")


def build_store(path: Path, count: int) -> float:
    start = time.perf_counter()
    with MessageStore.open(path) as store:
        for lo in range(0, count, BATCH):
            ids = range(lo, min(lo + BATCH, count))
            results = store.put_batch([Message(f"Bench{i % TOPICS}", BODY, tags=f"Tag{i % 3}", keys=(f"key-{i}",))
                                       for i in ids], [i // TOPICS % QUEUES for i in ids])
            if not results[-1].ok:
                raise RuntimeError(f"put failed: {results[-1]}")
    return time.perf_counter() - start


def derived_digest(store: Path) -> dict[str, Any]:
    """sha256 of every consume-queue file by path, and of the index files' contents in name order."""
    def digest(path: Path) -> str:
        h = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        return h.hexdigest()

    queues = {str(p.relative_to(store)): digest(p) for p in sorted((store / "consumequeue").rglob("*")) if p.is_file()}
    return {"consumequeue": queues, "index": [digest(p) for p in index_paths(store)]}


def delete_derived(store: Path) -> None:
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")


def timed(run: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--split-bytes", type=int, default=DEFAULT_SPLIT_BYTES)
    parser.add_argument("--dir", type=Path, default=None, help="where to build the store (default: a temp dir)")
    args = parser.parse_args(argv)
    from mqstore.pipeline.rebuild_job import rebuild
    from mqstore.pipeline.session import spark_session

    work = Path(tempfile.mkdtemp(prefix="mqstore-bench-rebuild-", dir=args.dir))
    store = work / "store"
    load_before = os.getloadavg()
    try:
        build_s = build_store(store, args.count)
        original = derived_digest(store)
        runs: dict[str, dict[str, Any]] = {}

        seconds, result = timed(lambda: rebuild_derived(store))
        runs["engine"] = {"seconds": round(seconds, 2), "identical": derived_digest(store) == original}
        delete_derived(store)
        seconds, result = timed(lambda: rebuild_derived(store))
        runs["engine_after_delete"] = {"seconds": round(seconds, 2), "identical": derived_digest(store) == original}

        session_s, spark = timed(lambda: spark_session(args.master, "mqstore-bench-rebuild"))
        delete_derived(store)
        seconds, spark_result = timed(lambda: rebuild(spark, store, split_bytes=args.split_bytes))
        runs["spark"] = {"seconds": round(seconds, 2), "identical": derived_digest(store) == original,
                         "session_start_seconds": round(session_s, 2), "master": args.master,
                         "split_bytes": args.split_bytes, "same_result_as_engine": spark_result == result}
        spark.stop()
        commitlog_bytes = sum(p.stat().st_size for p in (store / "commitlog").iterdir())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({
        "benchmark": "rebuild", "messages": args.count, "build_seconds": round(build_s, 2),
        "records": getattr(result, "records", None), "commitlog_file_bytes": commitlog_bytes,
        "index_files": len(original["index"]), "consume_queue_files": len(original["consumequeue"]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_before": [round(x, 2) for x in load_before],
                    "load_avg_after": [round(x, 2) for x in os.getloadavg()]},
        "runs": runs,
        "spark_vs_engine": round(runs["engine"]["seconds"] / runs["spark"]["seconds"], 2),
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
