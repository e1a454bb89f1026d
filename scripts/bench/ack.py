"""Ack-mode throughput next to offset mode, on one broker and one store in the same run.

    python -m mqstore.scripts.bench.ack [--count 20000] [--body-bytes 128] [--batch 64] [--readers 1]

Starts a real broker (``mqstore start``) on a fresh store in a temp dir, sends ``--count`` messages
to a 4-queue topic, then drains that same backlog three times, each with its own group:

- offset mode: one ``Consumer`` pulling by offset (offsets committed as it goes);
- ack mode, one consumer: one ``AckConsumer``, each ``receive`` batch acked in one request;
- ack mode, two consumers: two ``AckConsumer`` processes competing for the group's queues.

Rates are messages per second from the first message received (by any consumer) to the last ack,
or to the last message in offset mode; each ack-mode ``receive`` batch is acked before the next.
Prints one JSON object. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Consumer, Producer
from mqstore.scripts import harness

TOPIC = "BenchAck"
IDLE_S = 1.0  # a consumer that gets nothing for this long is done


def produce(store: Path, count: int, body_bytes: int) -> None:
    body = os.urandom(body_bytes)
    with Producer(store, timeout_ms=30_000) as producer:
        for start in range(0, count, 500):
            n = min(500, count - start)
            results = producer.send_batch([{"topic": TOPIC, "body": body, "tags": "TagA"}] * n)
            if not all(r.ok for r in results):
                raise RuntimeError(f"send failed: {[r for r in results if not r.ok][:1]}")


def wait_consumable(store: Path, count: int) -> None:
    from mqstore.ipc.client.api import Admin
    deadline = time.monotonic() + 60
    with Admin(store) as admin:
        while sum(hi - lo for lo, hi in admin.queue_info(TOPIC).values()) < count:
            if time.monotonic() > deadline:
                raise RuntimeError("the consume queues never caught up")
            time.sleep(0.05)


def offset_mode(store: Path, count: int, batch: int) -> dict[str, Any]:
    got = 0
    with Consumer(store, group="bench-offset", topic=TOPIC, start="earliest", max_per_pull=batch) as consumer:
        start = time.perf_counter()
        while got < count:
            msgs = consumer.poll(10_000, max_count=4 * batch)
            if not msgs:
                raise RuntimeError(f"offset mode stalled at {got} of {count}")
            got += len(msgs)
        elapsed = time.perf_counter() - start
    return {"consumers": 1, "messages": got, "seconds": round(elapsed, 3), "msgs_per_s": round(got / elapsed)}


def ack_worker(store: str, group: str, batch: int) -> tuple[int, float, float, int]:
    """Receive and ack until the group's queues stay empty: (acked, wall time of the first receive
    and of the last ack, refused acks)."""
    acked = refused = 0
    first = last = 0.0
    with AckConsumer(store, group=group, topic=TOPIC, max_per_pull=batch, long_poll_ms=200) as consumer:
        idle_since = time.time()
        while time.time() - idle_since < IDLE_S:
            deliveries = consumer.receive(4 * batch, 200)
            if not deliveries:
                continue
            first = first or time.time()
            statuses = consumer.ack(deliveries)
            last = idle_since = time.time()
            acked += statuses.count("OK")
            refused += len(statuses) - statuses.count("OK")
    return acked, first, last, refused


def ack_mode(store: Path, count: int, batch: int, consumers: int) -> dict[str, Any]:
    group = f"bench-ack-{consumers}"
    if consumers == 1:
        results = [ack_worker(str(store), group, batch)]
    else:
        with multiprocessing.get_context("spawn").Pool(consumers) as pool:
            results = pool.starmap(ack_worker, [(str(store), group, batch)] * consumers)
    acked = sum(r[0] for r in results)
    # from the first delivery any consumer got (process start-up is not the broker's time)
    elapsed = max(r[2] for r in results) - min(r[1] for r in results if r[1])
    if acked != count:
        raise RuntimeError(f"ack mode with {consumers} consumer(s) acked {acked} of {count}")
    return {"consumers": consumers, "messages": acked, "per_consumer": [r[0] for r in results],
            "refused_acks": sum(r[3] for r in results), "seconds": round(elapsed, 3),
            "msgs_per_s": round(acked / elapsed)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64, help="messages per pull (both modes)")
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None, help="where the store goes (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mqstore-ack-", dir=args.dir))
    try:
        config = root / "broker.toml"
        config.write_text(f"[broker]\nreaders = {args.readers}\n")
        broker = harness.BrokerProcess(root / "store", config=config).start()
        try:
            produce(broker.store, args.count, args.body_bytes)
            wait_consumable(broker.store, args.count)
            runs = [offset_mode(broker.store, args.count, args.batch),
                    ack_mode(broker.store, args.count, args.batch, 1),
                    ack_mode(broker.store, args.count, args.batch, 2)]
        finally:
            broker.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"benchmark": "ack", "messages": args.count, "body_bytes": args.body_bytes,
                      "batch": args.batch, "readers": args.readers,
                      "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                      "offset_mode": runs[0], "ack_mode_1_consumer": runs[1], "ack_mode_2_consumers": runs[2]},
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
