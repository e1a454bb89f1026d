"""Where a message's milliseconds go: send at a rate, stamp every hop, print per-hop percentiles.

    mqstore bench trace [--rate 1000] [--seconds 5] [--batch 1] [--flush ASYNC_FLUSH] [--config FILE]

A broker on a fresh temp store; a producer (this process) sends at ``--rate`` messages a second,
``--batch`` at a time, to a topic of four queues; a consumer process pulls them with the defaults;
a listener process subscribes to the broker's notices as any builder does (PUB/SUB fans out: it adds
no wait to the path). Every stamp is a wall clock in microseconds, taken by the process that sees
the event, so the stamps of the different processes compare:

| stamp     | where it comes from                                                               |
|-----------|-----------------------------------------------------------------------------------|
| send      | the producer, before the send (the body's first 8 bytes, as ``bench load`` stamps)|
| append    | the record's store timestamp (the writer's clock at append: milliseconds only)    |
| dispatch  | the writer's ``dispatch`` notice covering the record, as the listener sees it     |
| flushed   | the flush service's ``flushed`` notice covering it (SYNC_FLUSH holds dispatch for it) |
| arrived   | the consume-queue builder's ``arrived`` notice covering it (it applied the record)|
| indexed   | the index builder's ``indexed`` notice covering it (off the consume path)         |
| acked     | the producer holding the writer's answer                                          |
| replied   | the reader answering the pull that carried it (a traced pull's ``replied_us``)    |
| received  | the consumer's ``poll`` handing it to the application                             |

Prints one JSON object: per stamp the percentiles (p50, p90, p99, max) since send, and per hop of
the consume path (send -> [flushed ->] dispatch -> arrived -> replied -> received) the percentiles
of that step alone; in a terminal, the hop table also goes to stderr (rich). A step measured
between two processes' stamps includes the second one's wake-up; the listener's own wake-up makes
a notice's stamp late, never early, so a hop after a notice can come out slightly negative.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import multiprocess
import numpy as np

TOPIC = "Trace"
QUEUES = 4
STAMP_BYTES = 8
NOTICES = ("dispatch", "flushed", "arrived", "indexed")
DRAIN_S = 10.0


def now_us() -> int:
    return time.time_ns() // 1000


# -- the listener process ---------------------------------------------------------------------------

def listener_main(store: str, out: Any, ready: Any, stop: Any) -> None:
    """Every dispatch, flushed, arrived and indexed notice: (commitlog end it covers, when seen)."""
    import zmq

    from mqstore.ipc.transport.endpoints import Endpoints
    from mqstore.ipc.transport.sockets import connect
    from mqstore.ipc.wire import schema
    from mqstore.ipc.wire.notices import Arrived, Dispatch, Flushed, Indexed
    ep = Endpoints.for_store(store)
    ctx: zmq.Context[Any] = zmq.Context()
    sockets = {
        "dispatch": (connect(ctx, zmq.SUB, ep.dispatch, hwm=100_000, subscribe=(schema.DISPATCH, schema.TICK)),
                     lambda f: Dispatch.decode(f[1], f[2:]).to_phys),
        "flushed": (connect(ctx, zmq.SUB, ep.flushed, subscribe=(schema.FLUSHED,)), lambda f: Flushed.decode(f[1]).end),
        "arrived": (connect(ctx, zmq.SUB, ep.arrived, hwm=100_000, subscribe=(schema.ARRIVED,)),
                    lambda f: Arrived.decode(f[1]).applied),
        "indexed": (connect(ctx, zmq.SUB, ep.indexed, hwm=100_000, subscribe=(schema.INDEXED,)),
                    lambda f: Indexed.decode(f[1]).applied),
    }
    seen: dict[str, list[tuple[int, int]]] = {name: [] for name in NOTICES}
    poller = zmq.Poller()
    by_socket = {}
    for name, (sock, _) in sockets.items():
        poller.register(sock, zmq.POLLIN)
        by_socket[sock] = name
    drained_by = None  # once stopped: until every notice seen covers the last dispatch, or DRAIN_S

    def drained() -> bool:
        ends = {name: max(end for end, _ in got) for name, got in seen.items() if got}
        return not ends or all(end >= ends.get("dispatch", 0) for end in ends.values())

    try:
        while drained_by is None or (time.monotonic() < drained_by and not drained()):
            if drained_by is None and stop.is_set():
                drained_by = time.monotonic() + DRAIN_S
            for sock, _ in poller.poll(100):
                t_us = now_us()
                name = by_socket[sock]
                decode = sockets[name][1]
                while True:
                    try:
                        frames = sock.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    ready.set()  # a tick or a notice came: the subscriptions are in place
                    if frames[0] != schema.TICK:
                        seen[name].append((decode(frames), t_us))
    finally:
        for sock, _ in sockets.values():
            sock.close(0)
        ctx.term()
    out.put(seen)


# -- the consumer process ---------------------------------------------------------------------------

def consumer_main(store: str, out: Any, ready: Any, stop: Any) -> None:
    """Every message received: phys offset, send and store stamps, the reader's stamp of the reply
    that carried it, and when ``poll`` handed it over. The batches are kept as they came and decoded
    after the run, so the tracing costs the consumer nothing between two polls."""
    from mqstore.ipc.client.api import Consumer
    taken: list[tuple[Any, int]] = []  # (batch, received_us)
    with Consumer(store, group="bench-trace", topic=TOPIC, start="latest", auto_commit=False, trace=True) as consumer:
        assert consumer.pull_trace is not None
        ready.set()
        idle_since = None
        while True:
            batch = consumer.poll_batch(timeout_ms=100)
            if batch:
                taken.append((batch, now_us()))
            if batch or not stop.is_set():
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > 1.0:
                break
        replied = {(queue, queue_offset): replied_us for queue, first, last, replied_us, *_ in consumer.pull_trace
                   for queue_offset in range(first, last + 1)}
    rows = [(m.phys_offset, int.from_bytes(m.body[:STAMP_BYTES], "big"), m.store_ms,
             replied.get((m.queue_id, m.queue_offset), 0), received_us) for batch, received_us in taken for m in batch]
    out.put(np.asarray(rows, dtype=np.int64).reshape(-1, 5))


# -- the producer and the report ----------------------------------------------------------------------

def _send(store: Path, rate: float, seconds: float, batch: int, body_bytes: int) -> tuple[np.ndarray[Any, Any], int]:
    """Open loop at ``rate``: (phys offset, send_us, acked_us) of every message written; how many failed."""
    from mqstore.ipc.client.api import Producer
    rows: list[tuple[int, int, int]] = []
    filler = bytes(max(0, body_bytes - STAMP_BYTES))
    interval_s = batch / rate
    outstanding: list[tuple[int, Future[Any], list[int]]] = []
    failed = 0
    with Producer(store, timeout_ms=30_000) as producer:
        next_send = time.monotonic()
        stop_at = next_send + seconds
        while next_send < stop_at:
            delay = next_send - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            next_send += interval_s
            born = now_us()
            acked: list[int] = []
            future = producer.send_encoded_columns_async(TOPIC, [born.to_bytes(STAMP_BYTES, "big") + filler] * batch)
            future.add_done_callback(lambda _, acked=acked: acked.append(now_us()))
            outstanding.append((born, future, acked))
        for born, future, acked in outstanding:
            results = future.result()
            rows.extend((r.phys_offset, born, acked[0]) for r in results if r.ok)
            failed += sum(not r.ok for r in results)
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3), failed


def _covered_at(seen: list[tuple[int, int]], phys: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """When each record was first covered by a notice (its end past the record's start); 0: never."""
    if not seen:
        return np.zeros(len(phys), np.int64)
    ends = np.maximum.accumulate(np.asarray([e for e, _ in seen], np.int64))
    times = np.asarray([t for _, t in seen], np.int64)
    at = np.searchsorted(ends, phys, side="right")
    out = np.zeros(len(phys), np.int64)
    ok = at < len(ends)
    out[ok] = times[at[ok]]
    return out


def percentiles_ms(us: np.ndarray[Any, Any]) -> dict[str, float | int | None]:
    if us.size == 0:
        return {"samples": 0, "p50": None, "p90": None, "p99": None, "max": None}
    ms = us.astype(np.float64) / 1000
    return {"samples": int(us.size), **{f"p{p}": round(float(np.percentile(ms, p)), 3) for p in (50, 90, 99)},
            "max": round(float(ms.max()), 3)}


def report(sent: np.ndarray[Any, Any], received: np.ndarray[Any, Any], seen: dict[str, list[tuple[int, int]]],
           sync: bool) -> dict[str, Any]:
    """Per-stamp percentiles since send and per-hop percentiles along the consume path."""
    acked = dict(zip(sent[:, 0].tolist(), sent[:, 2].tolist(), strict=True))
    phys = received[:, 0]
    stamps = {"send": received[:, 1], "append": received[:, 2] * 1000,
              **{name: _covered_at(seen[name], phys) for name in NOTICES},
              "acked": np.asarray([acked.get(p, 0) for p in phys.tolist()], np.int64),
              "replied": received[:, 3], "received": received[:, 4]}
    since_send = {name: percentiles_ms((t - stamps["send"])[t > 0]) for name, t in stamps.items() if name != "send"}
    path = ["send", "flushed", "dispatch", "arrived", "replied", "received"] if sync else \
        ["send", "dispatch", "arrived", "replied", "received"]
    hops = {}
    for before, after in itertools.pairwise(path):
        both = (stamps[before] > 0) & (stamps[after] > 0)
        hops[f"{before} -> {after}"] = percentiles_ms((stamps[after] - stamps[before])[both])
    return {"sent": len(sent), "received": len(received), "since_send_ms": since_send, "hops_ms": hops}


def trace_run(work: Path, rate: float, seconds: float, *, batch: int = 1, body_bytes: int = 128,
              flush: str = "ASYNC_FLUSH", config: Path | None = None) -> dict[str, Any]:
    """A broker on a fresh store under ``work``, traced at ``rate`` for ``seconds``; the report."""
    from mqstore.ipc.client.api import Admin
    from mqstore.scripts import harness
    broker = harness.BrokerProcess(work / f"trace-{flush}-{round(rate)}", "--flush", flush, "--remoting", "off",
                                   config=config).start()
    ctx = multiprocess.get_context("spawn")
    try:
        with Admin(broker.store) as admin:
            admin.create_topic(TOPIC, QUEUES)
        stop = ctx.Event()
        listened, consumed = ctx.Queue(), ctx.Queue()
        listener_ready, consumer_ready = ctx.Event(), ctx.Event()
        store = str(broker.store)
        procs = [ctx.Process(target=listener_main, args=(store, listened, listener_ready, stop), daemon=True),
                 ctx.Process(target=consumer_main, args=(store, consumed, consumer_ready, stop), daemon=True)]
        for p in procs:
            p.start()
        if not (listener_ready.wait(60) and consumer_ready.wait(60)):
            raise RuntimeError("the listener or the consumer did not start")
        sent, failed = _send(broker.store, rate, seconds, batch, body_bytes)
        stop.set()
        seen, received = listened.get(timeout=60 + DRAIN_S), consumed.get(timeout=60 + DRAIN_S)
        for p in procs:
            p.join(10)
    finally:
        broker.discard()
    return {"flush": flush, "rate": round(rate), "batch": batch, "seconds": seconds, "body_bytes": body_bytes,
            "failed": failed, **report(sent, received, seen, flush == "SYNC_FLUSH")}


def hop_table(result: dict[str, Any]) -> Any:
    from rich.table import Table
    table = Table(title=f"{result['flush']} at {result['rate']:,} msgs/s: milliseconds per hop")
    for column in ("hop", "p50", "p90", "p99", "max"):
        table.add_column(column, justify="left" if column == "hop" else "right")
    rows = [*result["hops_ms"].items(), *((f"send -> {k}", v) for k, v in result["since_send_ms"].items())]
    for name, p in rows:
        table.add_row(name, *(f"{p[k]:.3f}" if p[k] is not None else "-" for k in ("p50", "p90", "p99", "max")))
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=1000.0, help="messages a second")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to send")
    parser.add_argument("--batch", type=int, default=1, help="messages per send")
    parser.add_argument("--body-bytes", type=int, default=128, help="bytes a body (its first 8 the send stamp)")
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                        help="the broker's flush mode")
    parser.add_argument("--config", type=Path, default=None, help="the broker's config file (default: none)")
    parser.add_argument("--dir", type=Path, default=None, help="where the store goes (default: a temp dir)")


def run(args: argparse.Namespace) -> int:
    if args.rate <= 0 or args.batch < 1 or args.seconds <= 0 or args.body_bytes < STAMP_BYTES:
        raise SystemExit(f"--rate, --seconds > 0, --batch >= 1, --body-bytes >= {STAMP_BYTES}")
    work = Path(tempfile.mkdtemp(prefix="mqstore-trace-", dir=args.dir))
    try:
        result = trace_run(work, args.rate, args.seconds, batch=args.batch, body_bytes=args.body_bytes,
                           flush=args.flush, config=args.config)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if sys.stderr.isatty():
        from rich.console import Console
        Console(stderr=True).print(hop_table(result))
    print(json.dumps({"benchmark": "trace", **result}, indent=2))
    return 0
