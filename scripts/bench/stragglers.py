"""Where the slowest messages waited: the suite's latency runs, repeated, every message over a bound traced.

    python -m mqstore.scripts.bench.stragglers [--runs 5] [--seconds 10] [--points half tenth sync_tenth]
                                               [--over-ms 100] [--max-rate MSGS_PER_S] [--inflight N] [--tree CHECKOUT]
                                               [--sample-every 100]

Each run starts a fresh broker per point (the suite's ``latency_run``: defaults, k producers, k
consumers and k readers, open loop at a share of the max rate; SYNC_FLUSH for ``sync_tenth``), with a
listener that hears the broker's notices as a builder does (``mqstore.scripts.bench.trace``'s), and
consumers that trace their pulls. Every message slower than ``--over-ms`` from send to consumed is
kept with its stamps (wall clock, microseconds; ``store`` in milliseconds as the record keeps it):

| stamp      | what                                                                            |
|------------|---------------------------------------------------------------------------------|
| send       | the producer, before the send                                                   |
| store      | the writer's clock as it appended the record                                    |
| dispatch   | the writer's dispatch notice covering it, as the listener heard it              |
| flushed    | the flush service's notice covering it                                          |
| arrived    | the consume-queue builder's notice covering it (the readers may answer from here)|
| pulled     | the consumer sending the pull that carried it (after arrived: the consumer was behind) |
| replied    | the reader answering that pull                                                  |
| taken      | the consumer's channel holding that reply                                       |
| received   | the application's poll handing it over                                          |
| prev_*     | replied and taken of the queue's pull before it (``prev_taken -> pulled``: held back) |

Per run and point: p50, p99, max and how many messages were over the bound, and for the slowest
few of each polled batch (``KEPT_PER_BATCH``: tracing every message of a consumer that fell behind
would keep it behind) the stamps as steps (``store - send``, ``arrived - store``, ...), so the hop
that held each straggler shows (one per send batch and queue, with how many messages it held); and
per step the p50 / p90 / p99 / max over a sample of every message (each consumer's every
``--sample-every``-th, ``hops_ms``), so where the typical message waits shows beside where the
slowest did. One JSON document on stdout.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import multiprocess
import numpy as np

from mqstore.scripts import harness
from mqstore.scripts.bench.load import STAMP_BYTES, Workload, run_load
from mqstore.scripts.bench.trace import DRAIN_S, _covered_at, listener_main, percentiles_ms

POINTS = {"half": ("ASYNC_FLUSH", 2), "tenth": ("ASYNC_FLUSH", 10), "sync_tenth": ("SYNC_FLUSH", 10)}
# a straggler's columns as a consumer records them
COLUMNS = ("phys_offset", "queue", "queue_offset", "send_us", "store_ms", "replied_us", "taken_us", "received_us",
           "pulled_us", "prev_replied_us", "prev_taken_us")
STEPS = (("send", "store"), ("store", "dispatch"), ("dispatch", "flushed"), ("dispatch", "arrived"),
         ("arrived", "replied"), ("pulled", "replied"), ("arrived", "pulled"), ("replied", "taken"),
         ("taken", "received"), ("prev_replied", "prev_taken"), ("prev_taken", "pulled"))
PATH_STEPS = ("send -> store", "store -> dispatch", "dispatch -> arrived", "arrived -> pulled", "pulled -> replied",
              "replied -> taken", "taken -> received")  # one after another (SYNC: dispatch waits for flushed)
MAX_KEPT = 20_000    # stragglers a consumer keeps at most
KEPT_PER_BATCH = 4   # the slowest of a polled batch's stragglers kept: a consumer that fell behind finds every
                     # message a straggler, and tracing each in Python kept it behind (seconds at half rate)
RECENT_PULLS = 256   # the traced pulls a polled batch can have come from (what the prefetch holds, and more)
PREVIOUS_PULLS = 65_536  # looked through for the queue's pull before the one that carried a message


def stragglers_of(batch: Any, latencies_us: np.ndarray[Any, Any], received_us: int, over_us: int,
                  pull_trace: Any) -> np.ndarray[Any, Any]:
    """The rows (``COLUMNS``) of a polled batch's messages slower than ``over_us`` (its slowest
    ``KEPT_PER_BATCH``); the traced pulls (``Consumer.pull_trace``) give when a reader answered each
    and when the reply was taken."""
    slow = np.flatnonzero(latencies_us > over_us)
    if slow.size > KEPT_PER_BATCH:
        slow = slow[np.argpartition(-latencies_us[slow], KEPT_PER_BATCH - 1)[:KEPT_PER_BATCH]]
    return traced_rows(batch, slow, received_us, pull_trace)


def sampled_of(batch: Any, seen_before: int, every: int, received_us: int, pull_trace: Any) -> np.ndarray[Any, Any]:
    """The rows of every ``every``-th message a consumer received (``seen_before`` came before this
    batch), whatever its latency: the typical message's hops."""
    first = (-seen_before) % every
    return traced_rows(batch, np.arange(first, len(batch), every), received_us, pull_trace)


class ConsumerTrace:
    """What a consumer of a traced run keeps of the batches it polls: the stragglers (over
    ``over_ms``, at most ``MAX_KEPT``) and every ``sample_every``-th message (0: none)."""

    def __init__(self, over_ms: float | None, sample_every: int) -> None:
        self.over_us = int((over_ms or 0) * 1000)
        self.sample_every = sample_every
        self.seen = 0
        self.slow: list[np.ndarray[Any, Any]] = []
        self.kept = 0
        self.sampled: list[np.ndarray[Any, Any]] = []
        self.gc_pauses_us: list[tuple[int, int, int]] = []  # (generation, start, microseconds) of the process's GCs
        self._gc_started = 0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter_ns() // 1000
        if phase == "start":
            self._gc_started = now
        elif self._gc_started:
            self.gc_pauses_us.append((info["generation"], time.time_ns() // 1000, now - self._gc_started))

    def add(self, batch: Any, latencies_us: np.ndarray[Any, Any], received_us: int, pull_trace: Any) -> None:
        if self.kept < MAX_KEPT:
            self.slow.append(stragglers_of(batch, latencies_us, received_us, self.over_us, pull_trace))
            self.kept += len(self.slow[-1])
        if self.sample_every > 0:
            self.sampled.append(sampled_of(batch, self.seen, self.sample_every, received_us, pull_trace))
        self.seen += len(batch)

    def rows(self) -> dict[str, np.ndarray[Any, Any]]:
        empty = np.zeros((0, len(COLUMNS)), np.int64)
        gc.callbacks.remove(self._on_gc)
        return {"stragglers": np.concatenate(self.slow) if self.slow else empty,
                "sampled": np.concatenate(self.sampled) if self.sampled else empty,
                "gc_pauses_us": np.asarray(self.gc_pauses_us, np.int64).reshape(-1, 3)}


def traced_rows(batch: Any, indices: np.ndarray[Any, Any], received_us: int, pull_trace: Any) -> np.ndarray[Any, Any]:
    """The rows (``COLUMNS``) of the batch's messages at ``indices``, with the stamps of the traced
    pull that brought each (zeros when it is no longer among the recent ones)."""
    if indices.size == 0:
        return np.zeros((0, len(COLUMNS)), np.int64)
    recent = _newest(pull_trace, RECENT_PULLS)
    rows = []
    for index in indices.tolist():
        message = batch[index]
        queue, queue_offset = message.queue_id, message.queue_offset
        carrying = next((i for i, (q, first, last, *_) in enumerate(recent)
                         if q == queue and first <= queue_offset <= last), None)
        replied_us = taken_us = pulled_us = prev_replied_us = prev_taken_us = 0
        if carrying is not None:
            replied_us, taken_us, pulled_us = recent[carrying][3:6]
            # the queue's pull before it: how long after its reply was taken this one went out
            before = next((pull for pull in recent[carrying + 1:] if pull[0] == queue), None)
            if before is None:  # further back: the pulls taken since are passed over by the carrying one's identity
                older = _newest(pull_trace, RECENT_PULLS + PREVIOUS_PULLS)
                at = older.index(recent[carrying])
                before = next((pull for pull in older[at + 1:] if pull[0] == queue), None)
            if before is not None:
                prev_replied_us, prev_taken_us = before[3:5]
        rows.append((message.phys_offset, queue, queue_offset, int.from_bytes(message.body[:STAMP_BYTES], "big"),
                     message.store_ms, replied_us, taken_us, received_us, pulled_us, prev_replied_us, prev_taken_us))
    return np.asarray(rows, np.int64).reshape(-1, len(COLUMNS))


def _newest(pull_trace: Any, count: int) -> list[tuple[int, ...]]:
    """The newest ``count`` traced pulls, newest first, copied in one step of C (the consumer's I/O
    thread appends meanwhile; a garbage collection's callback can let it in: then again)."""
    while True:
        try:
            return list(itertools.islice(reversed(pull_trace), count))
        except RuntimeError:  # deque mutated during iteration
            continue


def gc_summary(pauses_us: np.ndarray[Any, Any]) -> dict[str, Any]:
    """The consumers' garbage collections (``ConsumerTrace``): how many per generation, and the longest."""
    return {f"gen{gen}": {"count": int((pauses_us[:, 0] == gen).sum()),
                          "max_ms": round(float(pauses_us[pauses_us[:, 0] == gen, 2].max(initial=0)) / 1000, 3)}
            for gen in range(3)}


def hop_percentiles(rows: np.ndarray[Any, Any], seen: dict[str, list[tuple[int, int]]]) -> dict[str, Any]:
    """Per step (``STEPS``, and send -> received), the p50 / p90 / p99 / max in milliseconds over
    ``rows`` (a sample of every message, not only the slow ones) where both stamps are known."""
    if rows.size == 0:
        return {}
    stamps = _stamps(rows, seen)
    out = {}
    for a, b in (*STEPS, ("send", "received")):
        both = (stamps[a] > 0) & (stamps[b] > 0)
        out[f"{a} -> {b}"] = percentiles_ms((stamps[b] - stamps[a])[both])
    return out


def _stamps(rows: np.ndarray[Any, Any], seen: dict[str, list[tuple[int, int]]]) -> dict[str, np.ndarray[Any, Any]]:
    """Each stamp of the rows as a column of wall-clock microseconds (0: not known)."""
    col = {name: rows[:, i] for i, name in enumerate(COLUMNS)}
    return {"send": col["send_us"], "store": col["store_ms"] * 1000, "pulled": col["pulled_us"],
            "replied": col["replied_us"], "taken": col["taken_us"], "received": col["received_us"],
            "prev_replied": col["prev_replied_us"], "prev_taken": col["prev_taken_us"],
            **{name: _covered_at(seen.get(name, []), col["phys_offset"]) for name in ("dispatch", "flushed",
                                                                                       "arrived")}}


def straggler_steps(rows: np.ndarray[Any, Any], seen: dict[str, list[tuple[int, int]]]) -> list[dict[str, Any]]:
    """Each straggler's stamps as steps in milliseconds (None where a stamp is missing), slowest first."""
    out = []
    if rows.size == 0:
        return out
    columns = _stamps(rows, seen)
    for i in np.argsort(-(rows[:, 7] - rows[:, 3])).tolist():
        row = dict(zip(COLUMNS, rows[i].tolist(), strict=True))
        stamps = {name: int(at[i]) for name, at in columns.items()}
        steps = {f"{a} -> {b}": round((stamps[b] - stamps[a]) / 1000, 3) if stamps[a] and stamps[b] else None
                 for a, b in STEPS}
        out.append({"total_ms": round((row["received_us"] - row["send_us"]) / 1000, 3), "queue": row["queue"],
                    "queue_offset": row["queue_offset"], "phys_offset": row["phys_offset"], "steps_ms": steps})
    return out


def traced_run(work: Path, name: str, rate: float, seconds: float, base: Workload, flush: str,
               over_ms: float, keep: int, sample_every: int = 0) -> dict[str, Any]:
    """One latency run as the suite's (``mqstore.scripts.bench.sweep.latency_run``), with the notice
    listener and straggler-tracing consumers."""
    broker = harness.BrokerProcess(work / name, "--readers", str(base.readers), "--flush", flush, "--remoting",
                                   "off").start()
    ctx = multiprocess.get_context("spawn")
    stop, ready, heard = ctx.Event(), ctx.Event(), ctx.Queue()
    listener = ctx.Process(target=listener_main, args=(str(broker.store), heard, ready, stop), daemon=True)
    try:
        listener.start()
        spec = Workload(**{**base.__dict__, "rate": rate, "count": None, "duration_s": seconds,
                           "topic_prefix": "Latency", "straggler_ms": over_ms,
                           "sample_every": sample_every})
        result = run_load(broker.store, spec)
        stop.set()
        seen = heard.get(timeout=60 + DRAIN_S)
        listener.join(10)
    finally:
        stop.set()
        if listener.is_alive():
            listener.kill()
        broker.stop()
        shutil.rmtree(broker.store, ignore_errors=True)  # a run's store is not kept: many runs would fill the disk
    lat = result.summary["consume"]["latency_ms"]
    send = result.summary["send"]
    slow = straggler_steps(result.stragglers, seen)
    held_by: dict[str, int] = {}
    for straggler in slow:  # of those kept, the step that took longest (of the consume path, not overlapping ones)
        steps = {k: v for k, v in straggler["steps_ms"].items() if v is not None and k in PATH_STEPS}
        if steps:
            longest = max(steps, key=lambda k: steps[k])
            held_by[longest] = held_by.get(longest, 0) + 1
    return {"flush": flush, "rate": round(rate), "held_by": held_by, "sent": send["messages_ok"],
            "send_msgs_per_s": send["msgs_per_s"],
            "send_rt_max_ms": send["rt_max_ms"], "samples": lat["samples"], "p50": lat["p50"], "p99": lat["p99"],
            "max": lat["max"], "over": int((result.latencies_us > over_ms * 1000).sum()), "kept": len(slow),
            "hops_ms": hop_percentiles(result.sampled, seen),
            "consumer_gc": gc_summary(result.gc_pauses_us),
            "stragglers": _distinct(slow)[:keep]}


def _distinct(slow: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One straggler per send batch and queue (a batch's messages share their stamps), with how many it held."""
    out: dict[tuple[int, float], dict[str, Any]] = {}
    for straggler in slow:
        key = (straggler["queue"], straggler["total_ms"])
        if key in out:
            out[key]["messages"] += 1
        else:
            out[key] = {**straggler, "messages": 1}
    return list(out.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqstore.scripts.bench.stragglers",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="times each point is run (default 5)")
    parser.add_argument("--seconds", type=float, default=10.0, help="each run's sending time (default 10)")
    parser.add_argument("--points", nargs="*", choices=sorted(POINTS), default=["half", "sync_tenth"],
                        help="the suite's latency runs to repeat (default: half sync_tenth)")
    parser.add_argument("--over-ms", type=float, default=100.0, help="a straggler's bound (default 100)")
    parser.add_argument("--keep", type=int, default=20, help="stragglers reported per run, slowest first")
    parser.add_argument("--sample-every", type=int, default=100,
                        help="every N-th message received is traced too, for each step's percentiles over all "
                             "messages (hops_ms; default 100, 0: none)")
    parser.add_argument("--max-rate", type=float, default=None,
                        help="the max rate the shares are of (default: measured first, producers alone)")
    parser.add_argument("--procs", type=int, default=2, help="producers, consumers and readers (default 2)")
    parser.add_argument("--inflight", type=int, default=32, help="batches each producer keeps in flight (default 32)")
    parser.add_argument("--tree", type=Path, default=None, help="start the broker of this checkout")
    args = parser.parse_args(argv)
    if args.tree is not None:
        harness.ROOT = args.tree.resolve()
    base = Workload(producers=args.procs, consumers=args.procs, readers=args.procs, inflight=args.inflight)
    with tempfile.TemporaryDirectory(prefix="mqstore-stragglers-") as work:
        max_rate = args.max_rate
        if max_rate is None:
            from mqstore.scripts.bench.where import rate_point
            broker = harness.BrokerProcess(Path(work) / "max", "--readers", str(args.procs), "--remoting",
                                           "off").start()
            try:
                max_rate = rate_point(broker.store, base, None, args.seconds)["send_msgs_per_s"]
            finally:
                broker.stop()
        runs: list[dict[str, Any]] = []
        for run in range(args.runs):
            for point in args.points:
                flush, divisor = POINTS[point]
                started = time.monotonic()
                out = traced_run(Path(work), f"{point}-{run}", max_rate / divisor, args.seconds, base, flush,
                                 args.over_ms, args.keep, args.sample_every)
                runs.append({"run": run, "point": point, "wall_s": round(time.monotonic() - started, 1), **out})
    print(json.dumps({"benchmark": "stragglers", "max_rate": max_rate, "over_ms": args.over_ms, "runs": runs},
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
