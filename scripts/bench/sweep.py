"""The scaling sweep: throughput with 1..k producer processes and 1..k readers, plotted.

    mqstore bench sweep [--max-procs K] [--seconds 5] [--backlog 200000] [--out DIR]

- producers: one ASYNC_FLUSH broker; for p = 1..k, p producer processes send for ``--seconds``
  (128-byte bodies, batches of 100, tags on, keys on 10 %) and the appended msgs/s is recorded;
- readers: for r = 1..k, a broker with r reader processes; one producer writes a backlog of
  ``--backlog`` messages, then r consumer processes drain it (each pulling its share of the queues
  through the readers) and the consumed msgs/s is recorded;
- latency: one producer at half the best producer rate, open loop, one consumer, for the
  histogram of send -> consumed.

k defaults to the core count. Writes ``sweep.json`` and ``sweep.png`` (throughput vs processes, and
the latency histogram) into ``--out``, and prints the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.scripts import harness
from mqstore.scripts.bench.load import LoadResult, Workload, run_load


def producer_sweep(work: Path, procs: list[int], seconds: float, base: Workload,
                   config: Path | None = None) -> list[dict[str, Any]]:
    broker = harness.BrokerProcess(work / "sweep-producers", "--remoting", "off", config=config).start()
    points = []
    try:
        for p in procs:
            spec = Workload(**{**base.__dict__, "producers": p, "consumers": 0, "count": None, "duration_s": seconds,
                               "topic_prefix": f"SweepP{p}-"})
            send = run_load(broker.store, spec).summary["send"]
            points.append({"producers": p, "msgs_per_s": send["msgs_per_s"], "rt_avg_ms": send["rt_avg_ms"],
                           "failed": send["failed"]})
    finally:
        broker.discard()
    return points


def reader_sweep(work: Path, readers: list[int], backlog: int, base: Workload,
                 config: Path | None = None) -> list[dict[str, Any]]:
    points = []
    for r in readers:
        broker = harness.BrokerProcess(work / f"sweep-readers-{r}", "--readers", str(r), "--remoting", "off",
                                       config=config).start()
        try:
            fill = Workload(**{**base.__dict__, "producers": 1, "consumers": 0, "count": backlog, "duration_s": None,
                               "readers": r, "topic_prefix": "Backlog"})
            run_load(broker.store, fill)
            drain = Workload(**{**fill.__dict__, "producers": 0, "consumers": r})
            consume = run_load(broker.store, drain).summary["consume"]
            points.append({"readers": r, "consumers": r, "msgs_per_s": consume["msgs_per_s_over_run"],
                           "complete": consume["complete"]})
        finally:
            broker.discard()
    return points


def latency_run(work: Path, rate: float, seconds: float, base: Workload, producers: int = 1,
                consumers: int = 1, config: Path | None = None, flush: str = "ASYNC_FLUSH") -> LoadResult:
    """Open loop at ``rate`` over ``producers``, ``consumers`` pulling: the send -> consumed latencies.
    ``config``: the broker's config file, when not the defaults."""
    name = f"latency-{flush}-{round(rate)}{'-' + config.stem if config else ''}"
    broker = harness.BrokerProcess(work / name, "--readers", str(base.readers), "--flush", flush, "--remoting", "off",
                                   config=config).start()
    try:
        spec = Workload(**{**base.__dict__, "producers": producers, "consumers": consumers, "rate": rate, "count": None,
                           "duration_s": seconds, "topic_prefix": "Latency"})
        return run_load(broker.store, spec)
    finally:
        broker.discard()


def plot(path: Path, producers: list[dict[str, Any]], readers: list[dict[str, Any]],
         latencies_us: dict[str, np.ndarray[Any, Any]], title: str, latency_label: str) -> None:
    """Throughput vs processes on the left; on the right a histogram of each latency sample set."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.plot([p["producers"] for p in producers], [p["msgs_per_s"] for p in producers], "o-",
              label="appended (producers)")
    left.plot([r["readers"] for r in readers], [r["msgs_per_s"] for r in readers], "s-",
              label="consumed (readers = consumers)")
    left.set_xlabel("processes")
    left.set_ylabel("messages / s")
    left.set_ylim(bottom=0)
    left.set_xticks(sorted({p["producers"] for p in producers} | {r["readers"] for r in readers}))
    left.grid(True, alpha=0.3)
    left.legend()
    left.set_title("throughput vs processes")
    shown = {label: v.astype(np.float64) / 1000 for label, v in latencies_us.items() if v.size}
    if shown:
        low = max(min(float(v.min()) for v in shown.values()), 0.01)
        high = max(max(float(v.max()) for v in shown.values()), low * 2)
        bins = np.logspace(np.log10(low), np.log10(high), 80)
        for label, ms in shown.items():
            right.hist(ms, bins=bins, alpha=0.6,
                       label=f"{label}: p50 {np.percentile(ms, 50):.2f}, p99 {np.percentile(ms, 99):.2f} ms")
        right.set_xscale("log")
        right.legend(fontsize=8)
    right.set_xlabel("send -> consumed (ms)")
    right.set_ylabel("messages")
    right.set_title(latency_label)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sweep(work: Path, max_procs: int, seconds: float, backlog: int,
          config: Path | None = None, inflight: int = 4) -> tuple[dict[str, Any], LoadResult]:
    """``config``: every broker's config file, when not the defaults; ``inflight``: batch sends outstanding
    per producer."""
    base = Workload(count=None, duration_s=seconds, inflight=inflight)
    procs = list(range(1, max_procs + 1))
    producers = producer_sweep(work, procs, seconds, base, config)
    readers = reader_sweep(work, procs, backlog, base, config)
    best = max(p["msgs_per_s"] for p in producers)
    if best <= 0:  # every send refused: most often a disk past [retention] disk_warning_ratio
        raise RuntimeError(f"the producer sweep stored nothing ({sum(p['failed'] for p in producers)} sends "
                           f"failed); is the disk under {work} nearly full?")
    latency = latency_run(work, best / 2, seconds, base, config=config)
    return {"producers": producers, "readers": readers,
            "latency_at_half_rate": {"rate": round(best / 2), **latency.summary["consume"]["latency_ms"]}}, latency


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-procs", type=int, default=os.cpu_count() or 1, help="k (the core count)")
    parser.add_argument("--seconds", type=float, default=5.0, help="sending time per producer point")
    parser.add_argument("--backlog", type=int, default=200_000, help="messages each reader point drains")
    parser.add_argument("--out", type=Path, default=Path("."), help="where sweep.json and sweep.png go")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (default: a temp dir)")


def run(args: argparse.Namespace) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mqstore-sweep-", dir=args.dir) as work:
        result, latency = sweep(Path(work), args.max_procs, args.seconds, args.backlog)
    doc = {"benchmark": "sweep", "machine": {"cpus": os.cpu_count()}, **result}
    (args.out / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n")
    plot(args.out / "sweep.png", result["producers"], result["readers"], {"half the max rate": latency.latencies_us},
         f"mqstore scaling on {os.cpu_count()} cores", f"latency at {result['latency_at_half_rate']['rate']:,} msgs/s")
    print(json.dumps(doc, indent=2))
    return 0
