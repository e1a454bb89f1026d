"""The load generator: N producer processes and M consumer processes against a running broker.

    mqstore bench load --store DIR [--producers N] [--consumers M] [--body-bytes 128] [--batch 100]
                       [--topics 1] [--queues 4] [--key-share 0.1] [--tag-share 1.0]
                       [--rate MSGS_PER_S | max] [--count N | --duration S] [--start] [--flush MODE]

Every producer is its own OS process (``multiprocess``, spawn) with its own ``Producer``; it keeps
``--inflight`` batch sends outstanding, open loop at ``--rate`` (spread over the producers, a batch
at a time) or as fast as replies come. Each message's body starts with its born time (wall clock,
microseconds, 8 bytes big-endian; ``born_ms`` carries the same instant), so a consumer process
measures send -> consumed from it. The run always stops by itself: after ``--count`` messages or
``--duration`` seconds, and consumers after they have seen every message sent or ``--drain-s``.

Per second the live table (on stderr) shows RocketMQ's benchmark columns, Send TPS, Max RT,
Average RT, Send Failed, and the consume TPS; at the end one JSON summary goes to stdout.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import multiprocess
import numpy as np

from mqstore.ipc.wire.encoded import SendResults
from mqstore.scripts.bench.cpu import actor_cpu_s, broker_cpu, cpu_since
from mqstore.scripts.bench.start_line import StartLine

STAMP_BYTES = 8
REPORT_EVERY_S = 1.0
MAX_LATENCY_SAMPLES = 2_000_000
WIRES = ("columns", "encoded", "map")  # how producers send: Workload.wire


@dataclass(frozen=True)
class Workload:
    """What the producers send. ``count`` or ``duration_s`` bounds the run (count wins when both)."""

    producers: int = 1
    consumers: int = 0
    body_bytes: int = 128
    batch: int = 100
    topics: int = 1
    queues: int = 4
    key_share: float = 0.1
    tag_share: float = 1.0
    rate: float | None = None        # msgs/s over all producers; None: as fast as possible
    count: int | None = 100_000
    duration_s: float | None = None
    inflight: int = 4
    wire: str = "columns"            # Producer.send_encoded_columns (a batch to one topic, topics in turn),
                                     # "encoded": send_encoded (Outgoing objects), "map": send_batch
    topic_prefix: str = "Bench"
    readers: int = 1
    drain_s: float = 30.0
    timeout_ms: int = 30_000
    straggler_ms: float | None = None  # consumers keep the messages slower than this, with their pulls' stamps
    sample_every: int = 0              # with straggler_ms, and every sample_every-th message as well (0: none)

    def topic_names(self) -> list[str]:
        return [f"{self.topic_prefix}{t}" for t in range(self.topics)]

    def validate(self) -> Workload:
        if min(self.producers, self.consumers) < 0 or self.batch < 1 or self.topics < 1 or self.queues < 1:
            raise ValueError("batch, topics and queues must be at least 1, producers and consumers not negative")
        if self.producers + self.consumers == 0:
            raise ValueError("a run needs producers, consumers or both")
        if self.producers == 0 and self.count is None:
            raise ValueError("consumers alone drain a backlog of --count messages")
        if self.body_bytes < STAMP_BYTES:
            raise ValueError(f"bodies carry an {STAMP_BYTES}-byte born stamp: --body-bytes must be >= {STAMP_BYTES}")
        if not (0 <= self.key_share <= 1 and 0 <= self.tag_share <= 1):
            raise ValueError("key and tag shares are fractions between 0 and 1")
        if self.count is None and self.duration_s is None:
            raise ValueError("a run is bounded: give a count or a duration")
        if self.wire not in WIRES:
            raise ValueError("wire is 'columns' (send_encoded_columns), 'encoded' (send_encoded) or 'map' (send_batch)")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("the rate must be positive (leave it out for as fast as possible)")
        return self


@dataclass
class LoadResult:
    summary: dict[str, Any]
    latencies_us: np.ndarray[Any, np.dtype[np.int64]] = field(default_factory=lambda: np.zeros(0, np.int64))
    stragglers: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros((0, 11), np.int64))  # with straggler_ms
    sampled: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros((0, 11), np.int64))  # with sample_every
    gc_pauses_us: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros((0, 3), np.int64))  # the consumers'


def now_us() -> int:
    return time.time_ns() // 1000


def percentile_ms(samples_us: np.ndarray[Any, Any], q: float) -> float | None:
    if samples_us.size == 0:
        return None
    return round(float(np.percentile(samples_us, q)) / 1000, 3)


# -- producer process ---------------------------------------------------------------------------------

class _Meter:
    """Per-second counters a producer's I/O-thread callbacks add to and its main loop reports."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ok = self.failed = self.batches = 0
        self.rt_sum_ms = self.rt_max_ms = 0.0
        self.rts_ms: list[float] = []

    def add(self, ok: int, failed: int, rt_ms: float) -> None:
        with self.lock:
            self.ok += ok
            self.failed += failed
            self.batches += 1
            self.rt_sum_ms += rt_ms
            self.rt_max_ms = max(self.rt_max_ms, rt_ms)
            self.rts_ms.append(rt_ms)

    def take(self) -> dict[str, Any]:
        with self.lock:
            out = {"ok": self.ok, "failed": self.failed, "batches": self.batches, "rt_sum_ms": self.rt_sum_ms,
                   "rt_max_ms": self.rt_max_ms}
            self.ok = self.failed = self.batches = 0
            self.rt_sum_ms = self.rt_max_ms = 0.0
            return out


def _batch_template(spec: Workload, worker: int) -> list[dict[str, Any]]:
    """The batch's messages; the born stamp, born_ms and keys are filled in per send."""
    rng = np.random.default_rng(worker)
    tagged = rng.random(spec.batch) < spec.tag_share
    keyed = rng.random(spec.batch) < spec.key_share
    filler = os.urandom(spec.body_bytes - STAMP_BYTES)
    topics = spec.topic_names()
    return [{"topic": topics[(worker + i) % len(topics)], "body": filler,
             **({"tags": "TagA" if i % 2 else "TagB"} if tagged[i] else {}), "keyed": bool(keyed[i])}
            for i in range(spec.batch)]


def producer_main(worker: int, store: str, spec: Workload, share: int | None, stats: Any, start: StartLine) -> None:
    from mqstore.ipc.client.api import Outgoing, Producer
    template = _batch_template(spec, worker)
    meter = _Meter()
    rts: list[float] = []
    per_producer_rate = spec.rate / spec.producers if spec.rate else None
    interval_s = spec.batch / per_producer_rate if per_producer_rate else 0.0
    outstanding: deque[Future[Any]] = deque()
    seq = itertools.count()
    sent = 0
    with Producer(store, timeout_ms=spec.timeout_ms, retries=0) as producer:
        send = producer.send_encoded_async if spec.wire == "encoded" else producer.send_batch_async
        topics = spec.topic_names()
        bodies_of = [m["body"] for m in template]
        tags_of = [m.get("tags") for m in template]
        start.wait()
        begin = time.monotonic()
        cpu_begin = time.process_time()
        stop_at = begin + spec.duration_s if spec.duration_s is not None and share is None else float("inf")
        next_send = begin
        next_report = begin + REPORT_EVERY_S
        first_us = now_us()
        while (share is None or sent < share) and time.monotonic() < stop_at:
            if interval_s:
                delay = next_send - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                next_send += interval_s
            while len(outstanding) >= spec.inflight:
                _settle(outstanding.popleft())
            n = spec.batch if share is None else min(spec.batch, share - sent)
            born = now_us()
            stamp = born.to_bytes(STAMP_BYTES, "big")
            born_ms = born // 1000
            if spec.wire == "columns":  # the whole batch to one topic, the topics in turn
                t0 = time.perf_counter()
                future = producer.send_encoded_columns_async(
                    topics[(worker + sent // spec.batch) % len(topics)], [stamp + body for body in bodies_of[:n]],
                    tags=tags_of[:n], keys=[(f"k{worker}-{next(seq)}",) if m["keyed"] else () for m in template[:n]])
            else:
                msgs = [Outgoing(m["topic"], stamp + m["body"], m.get("tags"),
                                 (f"k{worker}-{next(seq)}",) if m["keyed"] else (), born_ms=born_ms)
                        for m in template[:n]]
                t0 = time.perf_counter()
                future = send(msgs)
            future.add_done_callback(partial(_done, meter, rts, t0=t0, n=n))
            outstanding.append(future)
            sent += n
            now = time.monotonic()
            if now >= next_report:
                next_report = now + REPORT_EVERY_S
                stats.put(("send", worker, meter.take()))
        while outstanding:
            _settle(outstanding.popleft())
        last_us = now_us()
    stats.put(("send", worker, meter.take()))
    stats.put(("send_done", worker, {"first_us": first_us, "last_us": last_us, "attempted": sent,
                                     "cpu_s": time.process_time() - cpu_begin,
                                     "rts_ms": np.asarray(rts, np.float32)}))


def _settle(future: Future[Any]) -> None:
    with contextlib.suppress(Exception):  # counted as failed by the callback
        future.result()


def _done(meter: _Meter, rts: list[float], future: Future[Any], t0: float, n: int) -> None:
    rt_ms = (time.perf_counter() - t0) * 1000
    rts.append(rt_ms)
    try:
        results = future.result()
    except Exception:
        meter.add(0, n, rt_ms)
        return
    # a send_encoded batch counts its stored records from the reply's columns, no SendResult made
    ok = results.ok_count if isinstance(results, SendResults) else sum(1 for r in results if r.ok)
    meter.add(ok, n - ok, rt_ms)


# -- consumer process ---------------------------------------------------------------------------------

def consumer_main(worker: int, store: str, spec: Workload, assignment: list[tuple[str, int]], stats: Any,
                  stop: Any, group: str, start: StartLine) -> None:
    from mqstore.ipc.client.api import Consumer
    from mqstore.scripts.bench.stragglers import ConsumerTrace
    trace = ConsumerTrace(spec.straggler_ms, spec.sample_every) if spec.straggler_ms is not None else None
    by_topic: dict[str, list[int]] = {}
    for topic, q in assignment:
        by_topic.setdefault(topic, []).append(q)
    consumers = [Consumer(store, group=group, topic=topic, queues=queues, start="earliest", long_poll_ms=200,
                          reader_count=spec.readers, auto_commit=False, timeout_ms=spec.timeout_ms,
                          trace=trace is not None)
                 for topic, queues in by_topic.items()]
    latencies: list[np.ndarray[Any, Any]] = []
    kept = 0
    count = 0
    last_msg_us = 0
    for consumer in consumers:
        consumer.ready()  # its queues assigned, its first pulls out
    start.wait()
    next_report = time.monotonic() + REPORT_EVERY_S
    cpu_begin = time.process_time()
    try:
        while not stop.is_set():
            for consumer in consumers:
                # the packed batch as pulled: only the bodies' stamps are read, in one call
                msgs = consumer.poll_batch(timeout_ms=50 if len(consumers) == 1 else 5)
                if not msgs:
                    continue
                arrived = last_msg_us = now_us()
                count += len(msgs)
                if kept < MAX_LATENCY_SAMPLES:
                    stamps = np.frombuffer(msgs.body_heads(STAMP_BYTES), dtype=">i8")
                    latencies.append(arrived - stamps.astype(np.int64))
                    kept += len(msgs)
                    if trace is not None:
                        trace.add(msgs, latencies[-1], arrived, consumer.pull_trace)
            if time.monotonic() >= next_report:
                next_report = time.monotonic() + REPORT_EVERY_S
                stats.put(("consume", worker, {"count": count}))
                count = 0
    finally:
        for consumer in consumers:
            consumer.close()
    stats.put(("consume", worker, {"count": count}))
    stats.put(("consume_done", worker, {"latencies_us": np.concatenate(latencies) if latencies
                                        else np.zeros(0, np.int64), "last_us": last_msg_us,
                                        **(trace.rows() if trace is not None else {}),
                                        "cpu_s": time.process_time() - cpu_begin}))


# -- the parent -----------------------------------------------------------------------------------------

def _create_topics(store: str, spec: Workload) -> None:
    from mqstore.ipc.client.api import Admin
    with Admin(store, timeout_ms=spec.timeout_ms) as admin:
        for topic in spec.topic_names():
            admin.create_topic(topic, spec.queues)


def run_load(store: Path | str, spec: Workload, *, live: bool = False) -> LoadResult:
    """Run the workload against the broker on ``store``; returns the summary and the latency samples."""
    from mqstore.scripts.bench.live import LiveTable
    spec.validate()
    store = str(store)
    _create_topics(store, spec)
    ctx = multiprocess.get_context("spawn")
    stats = ctx.Queue()
    stop = ctx.Event()
    group = f"bench-{os.getpid()}-{time.time_ns()}"
    pairs = [(t, q) for t in spec.topic_names() for q in range(spec.queues)]
    start = StartLine(ctx, min(spec.consumers, len(pairs)) + spec.producers)
    consumers = [ctx.Process(target=consumer_main, daemon=True,
                             args=(i, store, spec, pairs[i::spec.consumers], stats, stop, group, start))
                 for i in range(min(spec.consumers, len(pairs)))]
    shares = _split(spec.count, spec.producers) if spec.count is not None else [None] * spec.producers
    producers = [ctx.Process(target=producer_main, args=(i, store, spec, shares[i], stats, start), daemon=True)
                 for i in range(spec.producers)]
    cpu_before = actor_cpu_s(store)
    for p in consumers + producers:
        p.start()
    start_at = start.open(120 + 10 * len(consumers + producers))
    table = LiveTable(spec, live=live)
    send_done: dict[int, dict[str, Any]] = {}
    consume_done: dict[int, dict[str, Any]] = {}
    sent_ok = consumed = failed = 0
    if not producers:  # consumers alone: a backlog of ``count`` messages is already there
        sent_ok = spec.count or 0
    deadline = start_at + (spec.duration_s or 0) + 600 if spec.count is None else float("inf")
    drain_until = float("inf")
    try:
        with table:
            while len(consume_done) < len(consumers) or len(send_done) < len(producers):
                try:
                    kind, worker, data = stats.get(timeout=0.2)
                except queue.Empty:
                    kind, worker, data = "", -1, {}
                if kind == "send":
                    table.add_send(data)
                    sent_ok += data["ok"]
                    failed += data["failed"]
                elif kind == "send_done":
                    send_done[worker] = data
                elif kind == "consume":
                    table.add_consume(data["count"])
                    consumed += data["count"]
                elif kind == "consume_done":
                    consume_done[worker] = data
                table.tick(sent_ok, consumed)
                if len(send_done) == len(producers):
                    drain_until = min(drain_until, time.monotonic() + spec.drain_s)
                    if consumed >= sent_ok or time.monotonic() > drain_until:
                        stop.set()
                if time.time() > deadline or any(p.exitcode not in (None, 0) for p in producers + consumers):
                    raise RuntimeError("a load process died or the run overran its bound")
    finally:
        stop.set()
        for p in producers + consumers:
            p.join(10)
            if p.is_alive():
                p.kill()
    cpu_s = cpu_since(cpu_before, actor_cpu_s(store))
    return _summary(spec, table, send_done, consume_done, sent_ok, failed, consumed, int(start_at * 1e6), cpu_s)


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _summary(spec: Workload, table: Any, send_done: dict[int, dict[str, Any]],
             consume_done: dict[int, dict[str, Any]], sent_ok: int, failed: int, consumed: int,
             start_us: int, cpu_s: dict[str, float]) -> LoadResult:
    """``cpu_s``: each broker process's CPU seconds over the run, reported per message appended (per
    message consumed when nothing is sent)."""
    first = min((d["first_us"] for d in send_done.values()), default=start_us)
    last = max((d["last_us"] for d in send_done.values()), default=start_us)
    seconds = max(last - first, 1) / 1e6
    rts = np.concatenate([d["rts_ms"] for d in send_done.values()]) if send_done else np.zeros(0)
    send = {"messages_ok": sent_ok, "failed": failed, "seconds": round(seconds, 3),
            "msgs_per_s": round(sent_ok / seconds),
            "body_mb_per_s": round(sent_ok * spec.body_bytes / seconds / 1e6, 1),
            "rt_avg_ms": round(float(rts.mean()), 3) if rts.size else None,
            "rt_p99_ms": round(float(np.percentile(rts, 99)), 3) if rts.size else None,
            "rt_max_ms": round(float(rts.max()), 3) if rts.size else None}
    if not send_done:
        send = {"backlog": sent_ok}
    else:
        send["cpu_us_per_msg"] = round(sum(d["cpu_s"] for d in send_done.values()) / max(sent_ok, 1) * 1e6, 2)
    out: dict[str, Any] = {"workload": asdict(spec), "send": send,
                           "broker": broker_cpu(cpu_s, sent_ok if send_done else consumed), "per_second": table.rows}
    lat = np.concatenate([d["latencies_us"] for d in consume_done.values()]) if consume_done else np.zeros(0, np.int64)
    if spec.consumers:
        end = max((d["last_us"] for d in consume_done.values()), default=last)
        busy = [r["consume_tps"] for r in table.rows if r["consume_tps"]]
        out["consume"] = {
            "messages": consumed, "complete": consumed >= sent_ok,
            "msgs_per_s_over_run": round(consumed / max(end - first, 1) * 1e6),
            "msgs_per_s_peak_second": max(busy, default=0),
            "cpu_us_per_msg": round(sum(d["cpu_s"] for d in consume_done.values()) / max(consumed, 1) * 1e6, 2),
            "reader_cpu_us_per_msg": round(sum(s for name, s in cpu_s.items() if name.startswith("reader"))
                                           / max(consumed, 1) * 1e6, 2),  # every reader process
            "latency_ms": {"samples": int(lat.size), "p50": percentile_ms(lat, 50), "p99": percentile_ms(lat, 99),
                           "p99.9": percentile_ms(lat, 99.9),
                           "max": round(float(lat.max()) / 1000, 3) if lat.size else None}}
    traced = [np.concatenate([d[name] for d in consume_done.values() if name in d] or [np.zeros((0, width), np.int64)])
              for name, width in (("stragglers", 11), ("sampled", 11), ("gc_pauses_us", 3))]  # with straggler_ms
    return LoadResult(out, lat, *traced)
