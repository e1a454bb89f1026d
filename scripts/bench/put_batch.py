"""Embedded put_batch throughput next to this machine's raw mmap copy bandwidth, measured in one run.

    python -m mqstore.scripts.bench.put_batch [--count N] [--batch B] [--sizes 128,1024] [--dir DIR]

Prints one JSON object: for each body size, messages/s and MB/s of ``MessageStore.put_batch`` (tags on
every message, keys on 10 %, whole-record CRC on, synchronous dispatch into consume queues and index),
and the ratio of its byte rate to the raw copy bandwidth of a numpy copy into a mapped file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from mqstore.engine import Geometry, Message, MessageStore, StoreConfig
from mqstore.scripts.bench.limits import mmap_copy_bandwidth


def put_batch_rate(directory: Path, body_bytes: int, count: int, batch: int) -> dict[str, float]:
    store_dir = directory / f"store-{body_bytes}"
    body = os.urandom(body_bytes)
    batches = []
    for first in range(0, count, batch):
        batches.append([Message("BenchTopic", body, tags="TagA" if i % 2 else "TagB",
                                keys=(f"key-{i}",) if i % 10 == 0 else ())
                        for i in range(first, min(count, first + batch))])
    config = StoreConfig(geometry=Geometry(), max_body_bytes=max(body_bytes, 4 * 1024 * 1024))
    with MessageStore.open(store_dir, config) as store:
        start = time.perf_counter()
        for n, msgs in enumerate(batches):
            results = store.put_batch(msgs, queue_id=n % 4)
            if not results[-1].ok:
                raise RuntimeError(f"put failed: {results[-1]}")
        elapsed = time.perf_counter() - start
        stored_bytes = store.commitlog.max_offset
    shutil.rmtree(store_dir)
    return {"body_bytes": body_bytes, "messages": count, "batch": batch, "seconds": round(elapsed, 3),
            "msgs_per_s": round(count / elapsed), "stored_mb_per_s": round(stored_bytes / elapsed / 1e6, 1),
            "stored_bytes": stored_bytes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--sizes", default="128,1024")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="mqstore-bench-", dir=args.dir))
    try:
        bandwidth = mmap_copy_bandwidth(work)
        runs = [put_batch_rate(work, int(s), args.count, args.batch) for s in args.sizes.split(",")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for run in runs:
        run["ratio_to_mmap_copy"] = round(run["stored_mb_per_s"] * 1e6 / bandwidth, 4)
    print(json.dumps({"benchmark": "put_batch", "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                                             "mmap_copy_mb_per_s": round(bandwidth / 1e6, 1)},
                      "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
