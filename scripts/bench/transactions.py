"""Transactional send + commit throughput next to plain sends, on one broker in the same run.

    python -m mqstore.scripts.bench.transactions [--count 2000] [--threads 1 8] [--body-bytes 128]

Starts a real broker (``mqstore start``) on a fresh store in a temp dir and, for each thread count,
sends ``--count`` messages to a 4-queue topic from that many threads sharing one ``Producer``:

- plain: ``Producer.send``, one message a request, answered before the thread sends the next;
- transactional: ``Producer.send_transactional`` committing at once: the half message, the local
  transaction, the end (the transactions actor reads the half back, re-puts it on its topic and
  writes its op record) answered before the thread sends the next.

A transactional run counts until every committed message is consumable on the real topic. Each run
reports messages per second and the broker's CPU µs per message (``mqstore.scripts.bench.cpu``, psutil: the
actors' user + system time over the run). Prints one JSON object. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.ipc.client.api import Admin, Outgoing, Producer, TransactionState
from mqstore.scripts import harness
from mqstore.scripts.bench.cpu import actor_cpu_s, broker_cpu, cpu_since


def _threads(count: int, threads: int, send_one: Callable[[int], None]) -> None:
    def work(first: int) -> None:
        for i in range(first, count, threads):
            send_one(i)
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def _stored(admin: Admin, topic: str) -> int:
    return sum(hi - lo for lo, hi in admin.queue_info(topic).values())


def run(store: Path, topic: str, count: int, threads: int, body: bytes, transactional: bool) -> dict[str, Any]:
    failures: list[str] = []
    with Producer(store, timeout_ms=30_000) as producer, Admin(store) as admin:
        admin.create_topic(topic, 4)

        def plain(i: int) -> None:
            result = producer.send(topic, body)
            if not result.ok:
                failures.append(result.status)

        def commit(i: int) -> None:
            result = producer.send_transactional(Outgoing(topic, body), lambda m, r: TransactionState.COMMIT,
                                                 lambda m: TransactionState.COMMIT, group="bench-tx")
            if not result.send.ok or result.end_error:
                failures.append(result.end_error or result.send.status)

        before = actor_cpu_s(store)
        start = time.perf_counter()
        _threads(count, threads, commit if transactional else plain)
        deadline = time.monotonic() + 120
        while _stored(admin, topic) < count - len(failures):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: only {_stored(admin, topic)} of {count} consumable")
            time.sleep(0.01)
        elapsed = time.perf_counter() - start
        cpu = cpu_since(before, actor_cpu_s(store))
    if failures:
        raise RuntimeError(f"{topic}: {len(failures)} sends failed, first {failures[0]}")
    return {"threads": threads, "messages": count, "seconds": round(elapsed, 3),
            "msgs_per_s": round(count / elapsed), **broker_cpu(cpu, count)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2_000, help="messages per run")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8], help="sending threads, one run each")
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument("--dir", type=Path, default=None, help="where the store goes (default: a temp dir)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mqstore-tx-", dir=args.dir))
    body = os.urandom(args.body_bytes)
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "transactional": []}
    try:
        broker = harness.BrokerProcess(root / "store", "--remoting", "off").start()
        try:
            for threads in args.threads:
                runs["plain"].append(run(broker.store, f"BenchPlain{threads}", args.count, threads, body, False))
                runs["transactional"].append(run(broker.store, f"BenchTx{threads}", args.count, threads, body, True))
        finally:
            broker.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"benchmark": "transactions", "body_bytes": args.body_bytes,
                      "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, **runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
