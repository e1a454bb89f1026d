"""End-to-end broker benchmark: one producer's throughput and the latency from send to consumable,
in ASYNC_FLUSH and SYNC_FLUSH, next to this machine's limits measured in the same run.

    python -m mqstore.scripts.bench.e2e [--count 50000] [--batch 100] [--body-bytes 128] [--latency-count 2000]

Each mode starts a real broker (``mqstore start``, through ``mqstore.scripts.harness``) on a fresh store in
a temp dir and stops it afterwards. Latency: single sends, one at a time, each timed from before
``send`` until a consumer already long-polling the queue receives it. Limits (``mqstore.scripts.bench.limits``):
a ZeroMQ ipc DEALER/ROUTER round trip, and the rate of small appends each followed by fdatasync (what
SYNC_FLUSH is bounded by without group commit). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from mqstore.ipc.client.api import Consumer, Producer
from mqstore.scripts import harness
from mqstore.scripts.bench.limits import fdatasync_rate, ipc_round_trip_us


def throughput(store: Path, count: int, batch: int, body_bytes: int) -> dict[str, Any]:
    body = os.urandom(body_bytes)
    with Producer(store, timeout_ms=30_000) as producer:
        producer.send("Bench", body)  # topic created, connections up
        start = time.perf_counter()
        sent = 0
        while sent < count:
            n = min(batch, count - sent)
            results = producer.send_batch([{"topic": "Bench", "body": body, "tags": "TagA",
                                            "keys": [f"k{sent}"] if sent % 10 == 0 else []} for _ in range(n)])
            if not all(r.ok for r in results):
                raise RuntimeError(f"send failed: {[r for r in results if not r.ok][:1]}")
            sent += n
        elapsed = time.perf_counter() - start
    return {"messages": count, "batch": batch, "body_bytes": body_bytes, "seconds": round(elapsed, 3),
            "msgs_per_s": round(count / elapsed)}


def latency(store: Path, count: int, body_bytes: int) -> dict[str, Any]:
    """Send one message at a time; a consumer long-polling queue 0 stamps each arrival."""
    samples: list[float] = []
    with Producer(store, timeout_ms=30_000) as producer, \
            Consumer(store, group="bench-latency", topic="Latency", queues=[0], start="latest",
                     long_poll_ms=5000) as consumer:
        producer.send("Latency", b"warm-up", queue_id=0)
        while not consumer.poll(1000):
            pass
        for i in range(count):
            start = time.perf_counter()
            producer.send("Latency", os.urandom(body_bytes), queue_id=0)
            got = consumer.poll(10_000)
            if not got:
                raise RuntimeError(f"message {i} never became consumable")
            samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {"samples": count, "p50_ms": round(statistics.median(samples), 3),
            "p99_ms": round(samples[int(len(samples) * 0.99) - 1], 3), "max_ms": round(samples[-1], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument("--latency-count", type=int, default=2000)
    parser.add_argument("--modes", default="ASYNC_FLUSH,SYNC_FLUSH")
    parser.add_argument("--dir", type=Path, default=None, help="where stores go (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mqstore-e2e-", dir=args.dir))
    try:
        limits = {"ipc_round_trip_us": round(ipc_round_trip_us(root), 1),
                  "fdatasync_appends_per_s": round(fdatasync_rate(root))}
        runs = []
        for mode in args.modes.split(","):
            broker = harness.BrokerProcess(root / f"store-{mode}", "--flush", mode).start()
            try:
                run = {"mode": mode, "throughput": throughput(broker.store, args.count, args.batch, args.body_bytes),
                       "send_to_consumable": latency(broker.store, args.latency_count, args.body_bytes)}
            finally:
                broker.stop()
            run["throughput"]["ratio_to_fdatasync_rate"] = round(
                run["throughput"]["msgs_per_s"] / limits["fdatasync_appends_per_s"], 2)
            run["send_to_consumable"]["p50_in_ipc_round_trips"] = round(
                run["send_to_consumable"]["p50_ms"] * 1000 / limits["ipc_round_trip_us"], 1)
            runs.append(run)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"benchmark": "e2e", "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                                     **limits}, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
