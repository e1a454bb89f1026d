"""Timer messages: how late they are delivered with many pending, and how fast a due slot drains.

    python -m mqstore.scripts.bench.timer [--count 10000] [--delay-ms 8000] [--spread-ms 5000]
                                  [--precision-ms 1000] [--burst 10000] [--body-bytes 128]

Starts a real broker (``mqstore start``, RocketMQ's geometry) on a fresh store in a temp dir, then:

- spread: ``--count`` timers sent at once with ``TIMER_DELIVER_MS`` spread evenly over
  ``--spread-ms`` starting ``--delay-ms`` from now (every one pending before the first is due);
  each delivered copy's lateness is its store time minus the delivery time asked for (the put rule
  rounds to the precision, so a copy is due at most one precision step after that time), its
  receive lateness the time a consumer got it minus the same, and ``past_slot_due_ms`` its store time
  minus the time its slot came due (TIMER_OUT_MS + precision): the timer actor's and writer's part;
- burst: ``--burst`` timers all due at one instant: the drain rate is the burst over the span from
  first copy stored to the last, and the timer actor's CPU per message, enqueue and delivery (psutil).

With ``--load-rate N`` a producer process sends N plain messages a second to another topic all the
while (``load`` in the output says what it managed). Prints one JSON object. Not a test: numbers
depend on the machine.
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

import psutil

from mqstore.ipc.client.api import Consumer, Producer
from mqstore.ipc.wire.messages import Outgoing
from mqstore.scripts import harness

QUEUES = 4
SEND_BATCH = 500


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _send(store: Path, topic: str, due_ms: list[int], body: bytes) -> float:
    started = time.perf_counter()
    with Producer(store, timeout_ms=30_000) as producer:
        for start in range(0, len(due_ms), SEND_BATCH):
            batch = [Outgoing(topic, body, properties={"TIMER_DELIVER_MS": str(due)})
                     for due in due_ms[start:start + SEND_BATCH]]
            results = producer.send_batch(batch)
            if not all(r.ok for r in results):
                raise RuntimeError(f"send failed: {[r for r in results if not r.ok][:1]}")
    return time.perf_counter() - started


def _receive(store: Path, topic: str, count: int, timeout_s: float) -> list[tuple[int, int, int, int]]:
    """(asked delivery ms, store ms, received ms, the slot's TIMER_OUT_MS) of each copy."""
    got: list[tuple[int, int, int, int]] = []
    deadline = time.monotonic() + timeout_s
    with Consumer(store, group="bench-timer", topic=topic, queues=list(range(QUEUES)), start="earliest",
                  long_poll_ms=50) as consumer:
        while len(got) < count and time.monotonic() < deadline:
            batch = consumer.poll(100)
            now = _now_ms()
            got += [(int(m.properties["TIMER_DELIVER_MS"]), m.store_ms, now, int(m.properties["TIMER_OUT_MS"]))
                    for m in batch]
    if len(got) != count:
        raise RuntimeError(f"{len(got)} of {count} timers delivered within {timeout_s} s")
    return got


def _background(store: str, rate: int, body: bytes, stop: Any, sent: Any) -> None:
    """Plain messages to another topic at ``rate`` a second, in batches of 100, until ``stop``."""
    with Producer(store, timeout_ms=30_000) as producer:
        started = time.monotonic()
        count = 0
        while not stop.is_set():
            ahead = count / rate - (time.monotonic() - started)
            if ahead > 0:
                stop.wait(ahead)
                continue
            producer.send_encoded_columns("BenchTimerLoad", [body] * 100)
            count += 100
    sent.value = count


def _percentiles(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])

    return {"min": float(ordered[0]), "p50": at(0.50), "p99": at(0.99), "max": float(ordered[-1])}


def _timer_cpu_s(broker: harness.BrokerProcess) -> float:
    times = psutil.Process(broker.pid_of("timer")).cpu_times()
    return float(times.user + times.system)


def spread(broker: harness.BrokerProcess, count: int, delay_ms: int, spread_ms: int, precision_ms: int,
           body: bytes) -> dict[str, Any]:
    first = _now_ms() + delay_ms
    due = [first + i * spread_ms // count for i in range(count)]
    send_s = _send(broker.store, "BenchTimerSpread", due, body)
    if _now_ms() >= first:
        raise RuntimeError(f"sending took {send_s:.1f} s, past the first delivery: raise --delay-ms")
    got = _receive(broker.store, "BenchTimerSpread", count, delay_ms / 1000 + spread_ms / 1000 + 60)
    return {"timers": count, "pending_at_first_due": count, "send_s": round(send_s, 3),
            "lateness_ms": _percentiles([stored - asked for asked, stored, _, _ in got]),
            "receive_lateness_ms": _percentiles([received - asked for asked, _, received, _ in got]),
            # after the slot came due (TIMER_OUT_MS + P): what the timer actor and the writer took
            "past_slot_due_ms": _percentiles([stored - out - precision_ms for _, stored, _, out in got]),
            "early": sum(1 for asked, stored, _, _ in got if stored < asked)}


def burst(broker: harness.BrokerProcess, count: int, delay_ms: int, body: bytes) -> dict[str, Any]:
    cpu_before = _timer_cpu_s(broker)
    due_ms = _now_ms() + delay_ms
    _send(broker.store, "BenchTimerBurst", [due_ms] * count, body)
    got = _receive(broker.store, "BenchTimerBurst", count, delay_ms / 1000 + 120)
    cpu_s = _timer_cpu_s(broker) - cpu_before
    last_ms = max(stored for _, stored, _, _ in got)
    first_ms = min(stored for _, stored, _, _ in got)
    return {"timers": count, "due_to_last_stored_ms": last_ms - due_ms, "first_to_last_stored_ms": last_ms - first_ms,
            "delivered_per_s": round(count / max(1, last_ms - first_ms) * 1000),
            "timer_actor_cpu_us_per_msg": round(  # enqueue and delivery
                cpu_s / count * 1e6, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000, help="timers pending at once in the spread run")
    parser.add_argument("--delay-ms", type=int, default=8_000, help="from the send to the first delivery")
    parser.add_argument("--spread-ms", type=int, default=5_000, help="the spread run's deliveries span this")
    parser.add_argument("--precision-ms", type=int, default=1000, help="[store] timer_precision_ms")
    parser.add_argument("--burst", type=int, default=10_000, help="timers due at one instant in the burst run")
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument("--load-rate", type=int, default=0,
                        help="plain messages a second sent to another topic meanwhile (default: none)")
    parser.add_argument("--dir", type=Path, default=None, help="where the store goes (default: a temp dir)")
    args = parser.parse_args(argv)
    body = os.urandom(args.body_bytes)
    root = Path(tempfile.mkdtemp(prefix="mqstore-timer-", dir=args.dir))
    try:
        config = root / "broker.toml"
        config.write_text(f"[store]\ntimer_precision_ms = {args.precision_ms}\n\n[broker]\ndefault_queues = {QUEUES}\n")
        broker = harness.BrokerProcess(root / "store", "--remoting", "off", config=config).start()
        ctx = multiprocessing.get_context("spawn")
        stop, sent = ctx.Event(), ctx.Value("q", 0)
        load = ctx.Process(target=_background, args=(str(broker.store), args.load_rate, body, stop, sent))
        try:
            if args.load_rate:
                load.start()
            started = time.monotonic()
            runs: dict[str, Any] = {
                "spread": spread(broker, args.count, args.delay_ms, args.spread_ms, args.precision_ms, body),
                "burst": burst(broker, args.burst, args.delay_ms, body)}
            if args.load_rate:
                stop.set()
                load.join()
                runs["load"] = {"asked_per_s": args.load_rate,
                                "sent_per_s": round(sent.value / (time.monotonic() - started))}
        finally:
            stop.set()
            if load.is_alive():
                load.join()
            broker.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"benchmark": "timer", "precision_ms": args.precision_ms, "body_bytes": args.body_bytes,
                      "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, **runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
