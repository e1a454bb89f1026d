"""The whole benchmark in one run: limits, the target workloads, the Redis peer, the sweep; JSON and PNG.

    mqstore bench suite [--seconds 10] [--out docs/benchmarks] [--name NAME] [--install-redis] [--quick]

In order, on fresh stores in a temp dir (k = the core count):

1. limits (``mqstore.scripts.bench.limits``);
2. ASYNC_FLUSH, 128-byte bodies, k producers, batches of 100, ``--inflight`` (32) batches outstanding
   each, tags on, keys on 10 %, for ``--seconds``; then k consumers drain what was appended
   (consumable: the builders and readers keep up); the writer's and builders' RssAnon before and after;
   then the same sending with 4 batches outstanding (the depth before 32 was the default);
3. the same with 4 KiB bodies;
4. SYNC_FLUSH (group commit), 128-byte bodies;
5. send -> consumed latency with the default configuration, open loop, k producers, k consumers:
   ASYNC_FLUSH at half and at a tenth of the rate of 2, SYNC_FLUSH at a tenth of the rate of 4, and
   ASYNC_FLUSH at half and a tenth of the rate with 4 batches in flight (rates like the runs before);
   p50 / p99 / max and the consumed rate next to the sent rate; then ``mqstore.scripts.bench.trace`` at the
   two tenth rates, for the per-hop table (where the milliseconds go);
6. query by key through a reader, k processes, keys written in 2: one key per synchronous request,
   one key per request with several in flight, and many keys per request (``Admin.query_keys``, the
   keys gone over 10 times: once takes a tenth of a second);
7. recovery: consume queues and index rebuilt from a ``--recovery-mb`` commitlog, seconds per GiB;
8. Spark: the data source's Arrow read on local[2] against Spark's Parquet read (``bench.spark_read``);
9. the Redis Streams peer (``bench.redis_peer``), everysec and always, a pipeline of batch x inflight ``XADD``s;
10. the sweep (``mqstore.scripts.bench.sweep``), plotted with the latency histograms of 5;
11. replication (``bench.replication``) and the load points (``bench.where``: idle, 5,000 msgs/s, a tenth and
    half of 2's max rate): sections whose failure is their report, not the suite's.

Writes ``{name}.json`` and ``{name}.png`` into ``--out`` (name: ``suite-{git commit}``) and prints
the JSON. Each figure sits next to its ratio to the matching limit or peer; ``targets`` is the
table of the goals with what this run achieved.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import multiprocess

from mqstore.ipc.transport.control import control_request
from mqstore.scripts import harness
from mqstore.scripts.bench import limits as bench_limits
from mqstore.scripts.bench import redis_peer as bench_redis
from mqstore.scripts.bench import replication as bench_replication
from mqstore.scripts.bench import sweep as bench_sweep
from mqstore.scripts.bench import trace as bench_trace
from mqstore.scripts.bench import where as bench_where
from mqstore.scripts.bench.load import LoadResult, Workload, run_load

WATCHED_ACTORS = ("writer", "cqbuilder", "indexbuilder")
# send -> consumed, default configuration: (run name, flush mode, the workload of 2 or 4 whose max
# rate it divides, divisor)
LATENCY_RUNS = (("latency_half_rate", "ASYNC_FLUSH", "async_128", 2),
                ("latency_tenth_rate", "ASYNC_FLUSH", "async_128", 10),
                ("latency_sync_tenth_rate", "SYNC_FLUSH", "sync_128", 10),
                # the same fractions of the max rate with 4 batches in flight, the suite's depth before 32:
                # rates comparable with the runs before, where the deeper max puts the machine near saturation
                ("latency_half_rate_inflight_4", "ASYNC_FLUSH", "async_128_inflight_4", 2),
                ("latency_tenth_rate_inflight_4", "ASYNC_FLUSH", "async_128_inflight_4", 10))
LATENCY_FIELDS = ("rate", "p50", "p99", "p99.9", "max", "send_msgs_per_s", "consumed_msgs_per_s")


def private_memory(store: Path) -> dict[str, int]:
    """Anonymous resident memory (RssAnon: heap and the like, not the mapped store files) of the
    writer and the builders, bytes: what per-message state would make grow."""
    out = {}
    for name, info in control_request(store, "status")["actors"].items():
        if name in WATCHED_ACTORS and info.get("pid"):
            with contextlib.suppress(OSError, ValueError):
                for line in Path(f"/proc/{info['pid']}/status").read_text().splitlines():
                    if line.startswith("RssAnon:"):
                        out[name] = int(line.split()[1]) * 1024
    return out


def throughput(work: Path, name: str, spec: Workload, *, flush: str = "ASYNC_FLUSH", drain: bool = True,
               config: Path | None = None) -> tuple[dict[str, Any], Path, harness.BrokerProcess]:
    """Producers alone for the run, then consumers drain the backlog. The broker stays up (caller stops)."""
    broker = harness.BrokerProcess(work / name, "--flush", flush, "--readers", str(spec.readers), "--remoting",
                                   "off", config=config).start()
    memory_before = private_memory(broker.store)
    summary = run_load(broker.store, spec).summary
    send, memory_after = summary["send"], private_memory(broker.store)
    # where the time goes: CPU per message appended, by process (noise from other load stays out)
    cpu = {**summary["broker"]["actors_cpu_us_per_msg"], "producers": send.get("cpu_us_per_msg", 0)}
    out: dict[str, Any] = {"flush": flush, "producers": spec.producers, "body_bytes": spec.body_bytes,
                           "batch": spec.batch, "inflight": spec.inflight, "send": send,
                           "private_memory_bytes": {"before": memory_before, "after": memory_after},
                           "cpu_us_per_msg": cpu, "broker_cpu_us_per_msg": summary["broker"]["cpu_us_per_msg"],
                           "producers_cpu_us_per_msg": send.get("cpu_us_per_msg", 0)}
    if drain:  # the consumers' run: the broker's CPU per message consumed, the consumers' apart
        backlog = Workload(**{**spec.__dict__, "producers": 0, "consumers": spec.readers,
                              "count": send["messages_ok"], "duration_s": None})
        drained = run_load(broker.store, backlog).summary
        consume = drained["consume"]
        out["consume"] = {**{k: consume[k] for k in ("messages", "complete", "msgs_per_s_over_run")},
                          "broker_cpu_us_per_msg": drained["broker"]["cpu_us_per_msg"],
                          "consumers_cpu_us_per_msg": consume["cpu_us_per_msg"]}
    return out, broker.store, broker


QUERY_IN_FLIGHT = 32       # lookups outstanding per process, one key each (query_by_key_async)
QUERY_KEYS_PER_REQUEST = 100  # keys per query_keys request, one request outstanding per process
QUERY_MODES = ("one_at_a_time", "in_flight", "batched")
BATCHED_ROUNDS = 10  # batched lookups go over the keys this often: once is a tenth of a second, mostly noise


def query_rate(store: Path, procs: int, lookups: int, keyed: int) -> dict[str, Any]:
    """The same random keys looked up three ways, k processes each: one synchronous request per key;
    one key per request with QUERY_IN_FLIGHT requests outstanding; QUERY_KEYS_PER_REQUEST keys per
    request (``Admin.query_keys``), the keys gone over BATCHED_ROUNDS times."""
    ctx = multiprocess.get_context("spawn")
    share = lookups // procs
    out: dict[str, Any] = {"processes": procs, "lookups": share * procs, "in_flight_per_process": QUERY_IN_FLIGHT,
                           "keys_per_request": QUERY_KEYS_PER_REQUEST}
    for mode in QUERY_MODES:
        results = ctx.Queue()
        start_at = time.time() + 2.0 + 0.3 * procs  # every process connected and waiting: spawn skew stays out
        rounds = BATCHED_ROUNDS if mode == "batched" else 1
        jobs = [ctx.Process(target=_lookups, args=(str(store), i, share, keyed, mode, rounds, start_at, results),
                            daemon=True) for i in range(procs)]
        for j in jobs:
            j.start()
        done = [results.get(timeout=300) for _ in jobs]
        for j in jobs:
            j.join(10)
        seconds = max(d[1] for d in done) - start_at
        out[mode] = {"lookups": share * procs * rounds, "found": sum(d[2] for d in done), "seconds": round(seconds, 3),
                     "lookups_per_s": round(share * procs * rounds / seconds)}
    return out


def _lookups(store: str, worker: int, count: int, keyed: int, mode: str, rounds: int, start_at: float,
             out: Any) -> None:
    import random

    from mqstore.ipc.client.api import Admin
    rng = random.Random(worker)
    keys = [f"k0-{rng.randrange(keyed)}" for _ in range(count)]
    with Admin(store, timeout_ms=30_000) as admin:
        admin.ping()  # connected before the clock starts
        while time.time() < start_at:
            time.sleep(0.001)
        found = 0
        if mode == "one_at_a_time":
            found = sum(bool(admin.query_by_key("Bench0", key, max_count=1)) for key in keys)
        elif mode == "in_flight":
            window: list[Any] = []
            for key in keys:
                if len(window) == QUERY_IN_FLIGHT:
                    found += bool(window.pop(0).result())
                window.append(admin.query_by_key_async("Bench0", key, max_count=1))
            found += sum(bool(f.result()) for f in window)
        else:
            for _ in range(rounds):
                for i in range(0, count, QUERY_KEYS_PER_REQUEST):
                    found += sum(bool(b) for b in admin.query_keys("Bench0", keys[i:i + QUERY_KEYS_PER_REQUEST],
                                                                   max_count=1))
        out.put((start_at, time.time(), found))


def recovery_rate(work: Path, megabytes: int) -> dict[str, Any]:
    """Consume queues and index files deleted, then the store opened: its recovery rebuilds them from
    the commitlog (what a broker start does after losing them); seconds, and per GiB of records."""
    from mqstore.engine import MessageStore
    from mqstore.scripts.bench.rebuild import build_store, delete_derived
    store = work / "recovery"
    build_store(store, megabytes * 1024 * 1024 // 230)  # 128-byte body + header, topic, tags, key, UNIQ_KEY
    delete_derived(store)
    start = time.perf_counter()
    with MessageStore.open(store) as opened:
        written = opened.commitlog.max_offset - opened.commitlog.min_offset
        entries = sum(cq.max_queue_offset for cq in opened.queues)
    seconds = time.perf_counter() - start
    shutil.rmtree(store, ignore_errors=True)
    return {"commitlog_bytes": written, "consume_queue_entries": entries, "seconds": round(seconds, 3),
            "seconds_per_gib": round(seconds * 2**30 / written, 2)}


def spark_read_rate(work: Path, messages: int) -> dict[str, Any]:
    """``mqstore.scripts.bench.spark_read`` in a process of its own, so its JVM goes with it: the data source's
    Arrow read against Spark's Parquet read of the same rows (every column, and the aggregate's two),
    one session, best of 3 warm rounds."""
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.bench.spark_read", "--messages", str(messages),
                           "--rounds", "3", "--no-tuples", "--dir", str(work)],
                          capture_output=True, text=True, check=True, timeout=600)
    return dict(json.loads(proc.stdout[proc.stdout.index("{"):]))


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def suite(work: Path, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], LoadResult]:
    k = args.procs
    base = Workload(producers=k, readers=k, count=None, duration_s=args.seconds, batch=args.batch,
                    inflight=args.inflight)
    report: dict[str, Any] = {"limits": bench_limits.measure_limits(work, batch=args.batch, quick=args.quick)}
    runs: dict[str, Any] = {}
    runs["async_128"], store, broker = throughput(work, "async128", base, config=args.config)
    keyed = runs["async_128"]["send"]["messages_ok"] // k // 20  # well inside what worker 0 keyed (~10 %)
    try:
        runs["query_by_key"] = query_rate(store, k, args.lookups, max(keyed, 1))
    finally:
        broker.discard()
    runs["async_128_inflight_4"], _, broker = throughput(work, "async128i4", Workload(**{**base.__dict__,
                                                         "inflight": 4}), drain=False, config=args.config)
    broker.discard()
    runs["async_4k"], _, broker = throughput(work, "async4k", Workload(**{**base.__dict__, "body_bytes": 4096}),
                                             drain=False, config=args.config)
    broker.discard()
    runs["sync_128"], _, broker = throughput(work, "sync128", base, flush="SYNC_FLUSH", drain=False, config=args.config)
    broker.discard()
    latency = {}
    for name, flush, of, divisor in LATENCY_RUNS:
        rate = runs[of]["send"]["msgs_per_s"] / divisor
        result = bench_sweep.latency_run(work, rate, args.seconds, base, k, k, flush=flush, config=args.config)
        runs[name] = {"flush": flush, "rate": round(rate), **result.summary["consume"]["latency_ms"],
                      "send_msgs_per_s": result.summary["send"]["msgs_per_s"],
                      "consumed_msgs_per_s": result.summary["consume"]["msgs_per_s_over_run"]}
        if not name.endswith("_inflight_4"):  # the plot keeps to the judged runs
            latency[f"{flush.split('_')[0]} {round(rate):,} msgs/s"] = result.latencies_us
    for name, flush, of in (("trace_tenth_rate", "ASYNC_FLUSH", "async_128"),
                            ("trace_sync_tenth_rate", "SYNC_FLUSH", "sync_128")):
        runs[name] = bench_trace.trace_run(work, runs[of]["send"]["msgs_per_s"] / 10, args.seconds,
                                           batch=args.batch, flush=flush, config=args.config)
    runs["recovery"] = recovery_rate(work, args.recovery_mb)
    runs["spark_read"] = spark_read_rate(work, args.spark_messages)
    runs["replication"] = bench_replication.section(work, args)
    runs["load_points"] = bench_where.section(work, args, runs["async_128"]["send"]["msgs_per_s"])
    report["runs"] = runs
    redis_count = min(max(runs["async_128"]["send"]["messages_ok"], 10_000), args.redis_count)
    report["redis"] = bench_redis.run_peer(work, producers=k, count=redis_count, body_bytes=128,
                                           install=args.install_redis, pipeline=args.batch * args.inflight)
    sweep, sweep_latency = bench_sweep.sweep(work, k, args.seconds / 2, args.backlog, args.config, args.inflight)
    report["sweep"] = sweep
    return report, latency, sweep_latency


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _cpu_row(run: dict[str, Any], peer: dict[str, Any]) -> dict[str, Any]:
    """A run's broker CPU per message appended (and consumed) beside redis-server's own, and their ratio."""
    row = {"broker_cpu_us_per_msg": run["broker_cpu_us_per_msg"],
           "redis_server_cpu_us_per_msg": peer.get("server_cpu_us_per_msg"),
           "broker_over_redis_server": ratio(run["broker_cpu_us_per_msg"], peer.get("server_cpu_us_per_msg")),
           "producers_cpu_us_per_msg": run["producers_cpu_us_per_msg"]}
    if "consume" in run:  # drained: the broker's CPU per message consumed, and the consumers' own
        row["drain_broker_cpu_us_per_msg"] = run["consume"]["broker_cpu_us_per_msg"]
        row["consumers_cpu_us_per_msg"] = run["consume"]["consumers_cpu_us_per_msg"]
    return row


def keeps_up(run: dict[str, Any]) -> bool:
    """The consumers took messages as fast as the producers sent them (within 2 %)."""
    return bool(run["consumed_msgs_per_s"]) and run["consumed_msgs_per_s"] >= 0.98 * run["send_msgs_per_s"]


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    lim, runs, redis = report["limits"], report["runs"], report["redis"]
    a128, a4k, s128 = (runs[n]["send"] for n in ("async_128", "async_4k", "sync_128"))
    everysec = redis.get("everysec", {}).get("msgs_per_s")
    always = redis.get("always", {}).get("msgs_per_s")
    a4k_mb = a4k["msgs_per_s"] * 4096 / 1e6
    a128_cpu = runs["async_128"]
    memory = runs["async_128"]["private_memory_bytes"]
    growth = {n: memory["after"][n] - memory["before"].get(n, 0) for n in memory["after"]}
    rows = [("ASYNC 128 B appended and consumable", ">= 1,000,000 msgs/s, >= 5x Redis everysec",
         {"appended_msgs_per_s": a128["msgs_per_s"],
          "consumed_msgs_per_s": runs["async_128"]["consume"]["msgs_per_s_over_run"],
          "x_redis_everysec": ratio(a128["msgs_per_s"], everysec),
          "x_ipc_one_producer_bound": ratio(a128["msgs_per_s"], lim["ipc_one_producer_msgs_per_s"])},
         a128["msgs_per_s"] >= 1_000_000 and (ratio(a128["msgs_per_s"], everysec) or 0) >= 5),
        ("ASYNC 4 KiB", ">= 50 % of sequential write + fdatasync bandwidth",
         {"body_mb_per_s": round(a4k_mb, 1),
          "of_seq_write_fdatasync": ratio(a4k_mb, lim["seq_write_fdatasync_mb_per_s"])},
         (ratio(a4k_mb, lim["seq_write_fdatasync_mb_per_s"]) or 0) >= 0.5),
        ("SYNC 128 B (group commit)", ">= 200,000 msgs/s, >= 5x Redis always, >= 20x fdatasync rate",
         {"msgs_per_s": s128["msgs_per_s"], "x_redis_always": ratio(s128["msgs_per_s"], always),
          "x_fdatasync_rate": ratio(s128["msgs_per_s"], lim["fdatasync_appends_per_s"])},
         s128["msgs_per_s"] >= 200_000 and (ratio(s128["msgs_per_s"], always) or 0) >= 5
         and (ratio(s128["msgs_per_s"], lim["fdatasync_appends_per_s"]) or 0) >= 20),
        ("send -> consumed, ASYNC at a tenth of the max rate, defaults", "p99 <= 2 ms",
         {**{k: runs["latency_tenth_rate"][k] for k in LATENCY_FIELDS},
          "of_inflight_4_max": {k: runs["latency_tenth_rate_inflight_4"][k] for k in LATENCY_FIELDS}},
         (runs["latency_tenth_rate"]["p99"] or 1e9) <= 2),
        ("send -> consumed, ASYNC at half the max rate, defaults", "p99 <= 10 ms, consumed rate = sent rate",
         {**{k: runs["latency_half_rate"][k] for k in LATENCY_FIELDS},
          "of_inflight_4_max": {k: runs["latency_half_rate_inflight_4"][k] for k in LATENCY_FIELDS}},
         (runs["latency_half_rate"]["p99"] or 1e9) <= 10 and keeps_up(runs["latency_half_rate"])),
        ("send -> consumed, SYNC at a tenth of its max rate, defaults", "p99 <= 5 ms",
         {k: runs["latency_sync_tenth_rate"][k] for k in LATENCY_FIELDS},
         (runs["latency_sync_tenth_rate"]["p99"] or 1e9) <= 5),
        ("query by key through a reader", f">= 200,000 lookups/s batched ({QUERY_KEYS_PER_REQUEST} keys a request), "
         ">= 10,000/s one key a request",
         {"batched_lookups_per_s": runs["query_by_key"]["batched"]["lookups_per_s"],
          "one_at_a_time_lookups_per_s": runs["query_by_key"]["one_at_a_time"]["lookups_per_s"],
          f"{QUERY_IN_FLIGHT}_in_flight_lookups_per_s": runs["query_by_key"]["in_flight"]["lookups_per_s"],
          "found": {m: runs["query_by_key"][m]["found"] for m in QUERY_MODES},
          "lookups": {m: runs["query_by_key"][m]["lookups"] for m in QUERY_MODES}},
         runs["query_by_key"]["batched"]["lookups_per_s"] >= 200_000
         and runs["query_by_key"]["one_at_a_time"]["lookups_per_s"] >= 10_000
         and all(runs["query_by_key"][m]["found"] == runs["query_by_key"][m]["lookups"] for m in QUERY_MODES)),
        ("recovery: rebuild consume queues and index", "<= 2 s per GiB of commitlog",
         {"seconds_per_gib": runs["recovery"]["seconds_per_gib"],
          "measured_bytes": runs["recovery"]["commitlog_bytes"]},
         runs["recovery"]["seconds_per_gib"] <= 2),
        _spark_row(runs["spark_read"]),
        ("broker CPU per message, ASYNC 128 B (every broker process summed)", "<= 1.0 us (Redis's server: everysec)",
         {**_cpu_row(runs["async_128"], redis.get("everysec", {})),
          "inflight": runs["async_128"]["inflight"],
          "inflight_4_broker_cpu_us_per_msg": runs["async_128_inflight_4"]["broker_cpu_us_per_msg"],
          "inflight_4_producers_cpu_us_per_msg": runs["async_128_inflight_4"]["producers_cpu_us_per_msg"],
          "inflight_4_msgs_per_s": runs["async_128_inflight_4"]["send"]["msgs_per_s"]},
         runs["async_128"]["broker_cpu_us_per_msg"] <= 1.0),
        ("broker CPU per message, SYNC 128 B", "<= 1.5 us (Redis's server: always)",
         _cpu_row(runs["sync_128"], redis.get("always", {})), runs["sync_128"]["broker_cpu_us_per_msg"] <= 1.5),
        ("producer CPU per message, send_encoded_columns", "<= 1.5 us",
         {"producers_cpu_us_per_msg": a128_cpu["producers_cpu_us_per_msg"],
          "redis_py_producers_cpu_us_per_msg": redis.get("everysec", {}).get("producers_cpu_us_per_msg")},
         a128_cpu["producers_cpu_us_per_msg"] <= 1.5),
        ("writer and builders' private memory", "flat as the store grows",
         {"uss_growth_bytes": growth, "appended_bytes": a128["messages_ok"] * 230},
         all(g < 64 * 2**20 for g in growth.values())),
    ]
    return [{"workload": w, "target": t, "achieved": a, "met": bool(m)}
            for w, t, a, m in rows + bench_replication.suite_rows(runs.get("replication"))
            + bench_where.suite_rows(runs.get("load_points"), [runs[n]["max"] for n, *_ in LATENCY_RUNS])]


def _spark_row(run: dict[str, Any]) -> tuple[str, str, dict[str, Any], bool]:
    """Judged on the full materialisation (every column of every row); beside it the aggregate, and
    both again with the data source told the aggregate's two columns (``.schema(...)``: a Python data
    source gets no column pruning from Spark) against Parquet reading the same two."""
    rows = {f"{reader}_{action}_rows_per_s": run["runs"][f"{reader}_{action}"]["rows_per_s"]
            for reader in ("arrow", "parquet", "arrow_pruned", "parquet_pruned") for action in ("noop", "agg")}
    ratios = {f"{ratio}_{action}": run[f"{ratio}_{action}"]
              for ratio in ("arrow_over_parquet", "pruned_over_parquet") for action in ("noop", "agg")}
    return ("Spark batch read (Arrow, local[2])", "at least Spark's own Parquet read of the same rows "
            "(write.format('noop'): every column), same run",
            {**rows, **ratios, "messages": run["messages"]}, run["arrow_over_parquet_noop"] >= 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 1, help="k: producers, readers, sweep max")
    parser.add_argument("--seconds", type=float, default=10.0, help="sending time of each workload")
    parser.add_argument("--batch", type=int, default=100, help="messages per send")
    parser.add_argument("--inflight", type=int, default=32,
                        help="batch sends outstanding per producer; Redis's pipeline is batch x inflight commands")
    parser.add_argument("--lookups", type=int, default=20_000, help="key queries timed")
    parser.add_argument("--recovery-mb", type=int, default=256, help="commitlog MiB the recovery run recovers")
    parser.add_argument("--spark-messages", type=int, default=200_000, help="rows of the Spark read run")
    parser.add_argument("--redis-count", type=int, default=1_000_000, help="messages of the Redis Streams run")
    parser.add_argument("--backlog", type=int, default=200_000, help="messages each reader point drains")
    parser.add_argument("--install-redis", action="store_true", help="apt-get install -y redis-server if missing")
    parser.add_argument("--quick", action="store_true", help="small limit probes")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"), help="where the report goes")
    parser.add_argument("--name", default=None, help="file name stem (default suite-{commit})")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--config", type=Path, default=None,
                        help="every broker's config file (default: none, the defaults); e.g. [retention] ratios "
                             "on a disk that others fill, which would otherwise refuse sends")
    bench_replication.add_suite_arguments(parser)
    bench_where.add_point_arguments(parser)


def run(args: argparse.Namespace) -> int:
    commit = git_commit()
    name = args.name or f"suite-{commit}"
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="mqstore-suite-", dir=args.dir) as work:
        report, latency, _ = suite(Path(work), args)
    doc = {"benchmark": "suite", "commit": commit, "config": args.config.read_text() if args.config else "",
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_avg_after": [round(x, 2) for x in os.getloadavg()]},
           "seconds": round(time.time() - started), "targets": targets(report), **report}
    (args.out / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    sweep = report["sweep"]
    bench_sweep.plot(args.out / f"{name}.png", sweep["producers"], sweep["readers"], latency,
                     f"mqstore {commit} on {os.cpu_count()} cores", "send -> consumed, default configuration")
    print(json.dumps(doc, indent=2))
    return 0
