"""Producer CPU a message with less noise than a whole load run: ``load``'s producer loop
(``producer_main``, ``send_encoded_columns``, batches of 100 x 128 B, tags, keys on 10 %) run in this
process over a broker started on a temp store, its CPU from ``time.process_time`` (every thread of
the producer: the caller's, the client's I/O thread, ZeroMQ's); and ``encode_columns`` alone on the
same batch, offline.

    python -m mqstore.scripts.bench.producer_cpu [--inflight 4,16] [--count 100000] [--repeat 2]

One JSON line per run. On a shared machine compare runs made back to back, alternated with the
build they are compared with.
"""

from __future__ import annotations

import argparse
import itertools
import json
import queue
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENCODE_BATCHES = 5000


def loop_cpu_us(store: str, inflight: int, count: int) -> dict[str, Any]:
    """CPU of ``count`` messages sent by load's producer loop, a message."""
    import multiprocess

    from mqstore.scripts.bench.load import Workload, producer_main
    from mqstore.scripts.bench.start_line import StartLine
    spec = Workload(producers=1, count=count, inflight=inflight, timeout_ms=30_000).validate()
    stats: queue.Queue[Any] = queue.Queue()
    cpu_s, wall_s = time.process_time(), time.monotonic()
    producer_main(0, store, spec, count, stats, StartLine.at_once(multiprocess.get_context("spawn")))
    cpu_s, wall_s = time.process_time() - cpu_s, time.monotonic() - wall_s
    failed = 0
    while not stats.empty():  # the loop's per-second reports: what it could not store
        kind, _, data = stats.get_nowait()
        failed += data["failed"] if kind == "send" else 0
    return {"inflight": inflight, "count": count, "cpu_us_per_msg": round(cpu_s / count * 1e6, 2),
            "msgs_per_s": round(count / wall_s), "failed": failed}


def encode_cpu_us() -> float:
    """CPU of one ``encode_columns`` of load's batch (its bodies stamped, its keys made, as load does)."""
    from mqstore.engine.log.host import Host
    from mqstore.ipc.wire.encoded import BatchEncoder, Encoding
    from mqstore.scripts.bench.load import Workload, _batch_template
    encoder = BatchEncoder(Encoding(Host("127.0.0.1", 10911), True, 4 * 1024 * 1024))
    template = _batch_template(Workload(), 0)
    bodies, tags = [m["body"] for m in template], [m.get("tags") for m in template]
    seq = itertools.count()
    cpu_s = time.process_time()
    for _ in range(ENCODE_BATCHES):
        stamp = time.time_ns().to_bytes(8, "big")
        encoder.encode_columns("Bench0", [stamp + b for b in bodies], tags,
                               [(f"k0-{next(seq)}",) if m["keyed"] else () for m in template])
    return round((time.process_time() - cpu_s) / ENCODE_BATCHES * 1e6, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqstore.scripts.bench.producer_cpu", description=__doc__)
    parser.add_argument("--inflight", default="4,16", help="batch sends outstanding, a comma-separated list")
    parser.add_argument("--count", type=int, default=100_000, help="messages a run")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each inflight")
    args = parser.parse_args(argv)
    from mqstore.scripts import harness
    from mqstore.scripts.bench.load import Workload, _create_topics
    print(json.dumps({"encode_columns_cpu_us_per_batch": encode_cpu_us()}), flush=True)
    with tempfile.TemporaryDirectory(prefix="mqstore-producer-cpu-") as work:
        broker = harness.BrokerProcess(Path(work) / "store", "--flush", "ASYNC_FLUSH", "--remoting", "off").start()
        try:
            _create_topics(str(broker.store), Workload())
            for _ in range(args.repeat):
                for inflight in (int(x) for x in args.inflight.split(",")):
                    print(json.dumps(loop_cpu_us(str(broker.store), inflight, args.count)), flush=True)
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
