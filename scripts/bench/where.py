"""Where the broker's CPU goes: each actor's threads, user and system time, and wake-ups, per message.

    python -m mqstore.scripts.bench.where [--count 300000] [--flush ASYNC_FLUSH] [--producers 2] [--readers 2]

Starts a broker on a temp store (``mqstore.scripts.harness``), runs ``bench load``'s workload against it (2
producers, ``send_encoded_columns``, batches of 100, 128 B, tags, keys on 10 %: the suite's) and reads
every thread of every actor from ``/proc`` before and after: the user and system CPU of its main
thread (the actor's loop), of its ZeroMQ I/O thread and of any other (the writer's prefault thread),
per message appended, and the main thread's wake-ups (voluntary context switches: a poll that slept,
or a syscall that blocked; about one a round) as a rate and as messages a wake-up. Thread times come
in clock ticks (10 ms): over 300,000 messages a tick is 0.03 us a message. One JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from mqstore.ipc.transport.control import control_request
from mqstore.scripts import harness
from mqstore.scripts.bench.load import Workload, run_load

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def thread_times(pid: int) -> dict[str, tuple[float, float, int]]:
    """Per thread kind (``main``, ``zmq_io``, ``other``, summed): user s, system s, voluntary switches."""
    out: dict[str, tuple[float, float, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                switches = next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue  # a thread that ended meanwhile
        kind = "main" if int(tid) == pid else "zmq_io" if comm.startswith("ZMQbg/IO") else "other"
        user, system = int(fields[11]) * TICK_S, int(fields[12]) * TICK_S  # utime, stime: fields 14 and 15
        u, s, v = out.get(kind, (0.0, 0.0, 0))
        out[kind] = (u + user, s + system, v + (switches if kind == "main" else 0))
    return out


def actor_threads(store: Path) -> dict[str, dict[str, tuple[float, float, int]]]:
    actors = control_request(store, "status")["actors"]
    out = {}
    for name, info in actors.items():
        if info.get("pid"):
            try:
                out[name] = thread_times(int(info["pid"]))
            except FileNotFoundError:
                continue
    return out


def where(before: dict[str, Any], after: dict[str, Any], messages: int, seconds: float) -> dict[str, Any]:
    per_msg = 1e6 / max(messages, 1)
    actors: dict[str, Any] = {}
    for name, kinds in sorted(after.items()):
        row: dict[str, Any] = {}
        for kind, (user, system, switches) in sorted(kinds.items()):
            u0, s0, v0 = before.get(name, {}).get(kind, (0.0, 0.0, 0))
            if kind != "main" and user == u0 and system == s0:
                continue  # a thread that did nothing in the run
            row[kind] = {"user_us": round((user - u0) * per_msg, 2), "system_us": round((system - s0) * per_msg, 2)}
            if kind == "main":
                wakeups = switches - v0
                row["wakeups_per_s"] = round(wakeups / seconds)
                row["msgs_per_wakeup"] = round(messages / max(wakeups, 1), 1)
        row["total_us"] = round(sum(v["user_us"] + v["system_us"] for v in row.values() if isinstance(v, dict)), 2)
        actors[name] = row
    return {"broker_us_per_msg": round(sum(a["total_us"] for a in actors.values()), 2), "actors": actors}


def process_usage(store: Path) -> dict[str, tuple[float, int]]:
    """Per process of the broker (the supervisor and every actor): CPU seconds so far (user + system,
    every thread; psutil ``cpu_times``) and the main thread's voluntary context switches (psutil
    ``num_ctx_switches``: the actor loop's wake-ups)."""
    import psutil
    status = control_request(store, "status")
    pids = {"supervisor": status.get("pid"), **{n: i.get("pid") for n, i in status["actors"].items()}}
    out = {}
    for name, pid in pids.items():
        if pid:
            try:
                proc = psutil.Process(int(pid))
                times = proc.cpu_times()
                out[name] = (float(times.user + times.system), int(proc.num_ctx_switches().voluntary))
            except psutil.Error:
                continue  # an actor restarting meanwhile
    return out


def usage_since(before: dict[str, tuple[float, int]], after: dict[str, tuple[float, int]], seconds: float,
                messages: int = 0) -> dict[str, Any]:
    """Each process's share of a core and wake-ups a second over ``seconds`` (with ``messages``: its CPU
    µs and wake-ups per message, and messages a wake-up: the size of its rounds), and the sum."""
    actors: dict[str, Any] = {}
    for name, (cpu_s, switches) in sorted(after.items()):
        cpu0, sw0 = before.get(name, (0.0, 0))
        row = {"core_percent": round((cpu_s - cpu0) / seconds * 100, 3),
               "wakeups_per_s": round((switches - sw0) / seconds, 1)}
        if messages:
            row["cpu_us_per_msg"] = round((cpu_s - cpu0) / messages * 1e6, 2)
            row["msgs_per_wakeup"] = round(messages / max(switches - sw0, 1), 1)
        actors[name] = row
    total = {"core_percent": round(sum(a["core_percent"] for a in actors.values()), 3),
             "wakeups_per_s": round(sum(a["wakeups_per_s"] for a in actors.values()), 1)}
    if messages:
        total["broker_cpu_us_per_msg"] = round(sum(a["cpu_us_per_msg"] for a in actors.values()), 2)
    return {**total, "actors": actors}


# a one-second sample under both: what the last action set going is over (steady idle wakes the
# whole broker about 5 times a second)
QUIET_CORE_PERCENT = 5.0
QUIET_WAKEUPS_PER_S = 20.0
SETTLE_DEADLINE_S = 60.0


def settle(store: Path, settle_s: float) -> float:
    """Wait ``settle_s``, then until the next commitlog file is prepared (no ``.spare.preparing``: the
    flusher populates it after start) and two one-second samples of the whole broker in a row are quiet (the
    readers and the metrics taking in thousands of new topics), at most ``SETTLE_DEADLINE_S``: how
    long it took. Steady idle is what the window after it measures; the reaction to the action is this."""
    start, quiet = time.monotonic(), 0
    time.sleep(settle_s)  # the least wait, then samples until two in a row are quiet
    while quiet < 2 and time.monotonic() - start < SETTLE_DEADLINE_S:
        before, sample_start = process_usage(store), time.monotonic()
        time.sleep(1.0)
        sample = usage_since(before, process_usage(store), time.monotonic() - sample_start)
        preparing = (store / "commitlog" / ".spare.preparing").exists()
        quiet = quiet + 1 if (not preparing and sample["core_percent"] < QUIET_CORE_PERCENT
                              and sample["wakeups_per_s"] < QUIET_WAKEUPS_PER_S) else 0
    return round(time.monotonic() - start, 1)


def idle_window(store: Path, seconds: float, settle_s: float) -> dict[str, Any]:
    """Nothing sent, nothing pulled: once the broker has settled (``settle``), each process's CPU and
    wake-ups over ``seconds``."""
    settled_after_s = settle(store, settle_s)
    before, start = process_usage(store), time.monotonic()
    time.sleep(seconds)
    return {"seconds": seconds, "settled_after_s": settled_after_s,
            **usage_since(before, process_usage(store), time.monotonic() - start)}


def add_topics(store: Path, first: int, last: int) -> None:
    """Topics ``Idle{first}`` .. ``Idle{last - 1}``, one queue and one message each."""
    from mqstore.ipc.client.api import Admin, Producer
    with Admin(store, timeout_ms=60_000) as admin, Producer(store, timeout_ms=60_000) as producer:
        for t in range(first, last):
            admin.create_topic(f"Idle{t}", 1)
            producer.send(f"Idle{t}", b"idle")


def add_groups(store: Path, count: int) -> None:
    """``count`` consumer groups, each with a committed offset on topic ``Idle0``."""
    from mqstore.ipc.client.api import Admin
    with Admin(store, timeout_ms=60_000) as admin:
        for g in range(count):
            admin.commit_offset(f"idle-group-{g}", "Idle0", 0, 1)


def idle_points(work: Path, seconds: float, settle_s: float, topics: tuple[int, ...], groups: int) -> dict[str, Any]:
    """One broker as ``mqstore start`` runs it (remoting and metrics on, free ports), idle with no
    topics, then with ``topics`` topics of one message each, then with ``groups`` consumer groups."""
    base = harness.free_port_range(2)
    broker = harness.BrokerProcess(work / "idle", "--remoting-port", str(base), "--metrics", "on",
                                   "--metrics-port", str(base + 1)).start()
    out: dict[str, Any] = {}
    try:
        out["idle"] = idle_window(broker.store, seconds, settle_s)
        made = 0
        for count in topics:
            add_topics(broker.store, made, count)
            made = count
            out[f"idle_{count}_topics"] = idle_window(broker.store, seconds, settle_s)
        if groups and made:
            add_groups(broker.store, groups)
            out[f"idle_{made}_topics_{groups}_groups"] = idle_window(broker.store, seconds, settle_s)
    finally:
        broker.stop()
        shutil.rmtree(broker.store, ignore_errors=True)  # a point's store is GiBs: gone before the next
    return out


def rate_point(store: Path, spec: Workload, rate: float | None, seconds: float) -> dict[str, Any]:
    """``spec`` open loop at ``rate`` (None: as fast as replies come, no consumers) for ``seconds``:
    each process's CPU and wake-ups per message, the broker's sum, and send -> consumed latency."""
    consumers = spec.consumers if rate else 0
    run = Workload(**{**spec.__dict__, "rate": rate, "consumers": consumers, "count": None, "duration_s": seconds,
                      "topic_prefix": f"Rate{round(rate or 0)}-"})
    before, start = process_usage(store), time.monotonic()
    summary = run_load(store, run).summary
    send = summary["send"]
    out = {"rate": round(rate) if rate else None, "send_msgs_per_s": send["msgs_per_s"],
           "failed": send["failed"], **usage_since(before, process_usage(store), time.monotonic() - start,
                                                    max(send["messages_ok"], 1))}
    if consumers:
        lat = summary["consume"]["latency_ms"]
        out["latency_ms"] = {k: lat[k] for k in ("samples", "p50", "p99", "max")}
        out["consumed_msgs_per_s"] = summary["consume"]["msgs_per_s_over_run"]
    return out


RATE_POINTS = (("rate_5000", None, 5000.0), ("tenth_of_max", 10, None), ("half_of_max", 2, None))


def rate_points(work: Path, spec: Workload, seconds: float, max_rate: float | None = None) -> dict[str, Any]:
    """The max rate (producers alone, unless given: measured in the same run), then 5,000 msgs/s, a
    tenth and half of it with consumers, on one broker (defaults, remoting off: the load is over ipc)."""
    broker = harness.BrokerProcess(work / "rates", "--readers", str(spec.readers), "--remoting", "off").start()
    out: dict[str, Any] = {}
    try:
        if max_rate is None:
            out["max"] = rate_point(broker.store, spec, None, seconds)
            max_rate = out["max"]["send_msgs_per_s"]
        out["max_rate"] = max_rate
        for name, divisor, fixed in RATE_POINTS:
            out[name] = rate_point(broker.store, spec, fixed or max_rate / (divisor or 1), seconds)
    finally:
        broker.stop()
        shutil.rmtree(broker.store, ignore_errors=True)
    return out


def load_points(work: Path, args: argparse.Namespace, max_rate: float | None = None) -> dict[str, Any]:
    """Every point ``args.points`` names: ``idle`` (and its topics and groups), ``rates``."""
    out: dict[str, Any] = {}
    if "idle" in args.points:
        out.update(idle_points(work, args.idle_seconds, args.settle_seconds, tuple(args.idle_topics), args.idle_groups))
    if "rates" in args.points:
        spec = Workload(producers=args.producers, consumers=args.producers, readers=args.readers,
                        inflight=args.inflight)
        out.update(rate_points(work, spec, args.rate_seconds, max_rate))
    return out


def add_point_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="each idle window (default 10)")
    parser.add_argument("--settle-seconds", type=float, default=8.0,
                        help="least wait before each idle window, then until the broker is quiet (default 8: "
                             "a reader learns its readable end at its next wake, up to 5 s after a send)")
    parser.add_argument("--idle-topics", type=int, nargs="*", default=[500, 2000],
                        help="topic counts of the idle points, one message each (default 500 2000)")
    parser.add_argument("--idle-groups", type=int, default=5000, help="consumer groups of the last idle point")
    parser.add_argument("--rate-seconds", type=float, default=10.0, help="each rate point's sending time")


IDLE_GOAL_PERCENT = 0.5          # of a core, every process of the broker summed: no topics
IDLE_MANY_GOAL_PERCENT = 1.0     # with many topics or groups
CPU_GOALS_US = {"rate_5000": 8.0, "tenth_of_max": 4.0}  # broker CPU a message at these points
LATENCY_MAX_GOAL_MS = 100.0      # the slowest message of every latency run


def section(work: Path, args: argparse.Namespace, max_rate: float | None) -> dict[str, Any]:
    """The suite's load points on its workload (k producers, consumers and readers), at the suite's
    max rate: a failure is the section's report, never the end of the suite."""
    points = argparse.Namespace(**{**vars(args), "points": ["idle", "rates"], "producers": args.procs,
                                   "readers": args.procs})
    try:
        return load_points(work / "points", points, max_rate)
    except Exception as exc:  # the rest of the suite stands without this section
        return {"error": f"{type(exc).__name__}: {exc}"}


def suite_rows(report: dict[str, Any] | None, latency_max_ms: list[float]) -> list[tuple[str, str, Any, bool]]:
    """The load points' goals as rows of the suite's targets table; ``latency_max_ms``: the slowest
    message of each of the suite's other latency runs, judged with the rate points' own."""
    if not report or "error" in report:
        return [("load points (idle, 5,000 msgs/s, a tenth and half of the max)", "the section ran",
                 (report or {}).get("error", "not run"), False)]
    rows: list[tuple[str, str, Any, bool]] = []
    for name, point in report.items():
        if not name.startswith("idle"):
            continue
        goal = IDLE_GOAL_PERCENT if name == "idle" else IDLE_MANY_GOAL_PERCENT
        busiest = sorted(point["actors"].items(), key=lambda a: -a[1]["core_percent"])[:4]
        rows.append((f"broker idle, {name.replace('_', ' ')} (every process summed)", f"<= {goal} % of a core",
                     {"core_percent": point["core_percent"], "wakeups_per_s": point["wakeups_per_s"],
                      "settled_after_s": point.get("settled_after_s"),
                      "busiest": {a: r["core_percent"] for a, r in busiest}}, point["core_percent"] <= goal))
    for name, goal_us in CPU_GOALS_US.items():
        point = report[name]
        achieved = {k: point[k] for k in ("broker_cpu_us_per_msg", "latency_ms", "send_msgs_per_s", "wakeups_per_s")}
        rows.append((f"broker CPU a message at {name.replace('_', ' ')} ({point['rate']:,} msgs/s)",
                     f"<= {goal_us} us", achieved, point["broker_cpu_us_per_msg"] <= goal_us))
    maxima = [*latency_max_ms, *(p["latency_ms"]["max"] for n, p in report.items() if n in CPU_GOALS_US
                                 or n == "half_of_max")]
    known = [m for m in maxima if m is not None]
    rows.append(("send -> consumed, the slowest message of every latency run", f"<= {LATENCY_MAX_GOAL_MS:g} ms",
                 {"max_ms": known}, bool(known) and len(known) == len(maxima) and max(known) <= LATENCY_MAX_GOAL_MS))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqstore.scripts.bench.where", description=__doc__.split("\n")[0])
    parser.add_argument("--points", nargs="*", choices=("idle", "rates"), default=[],
                        help="load points instead of the one full-load run: idle (no topics, then --idle-topics, "
                             "then --idle-groups), rates (the max, 5,000 msgs/s, a tenth and half of the max)")
    parser.add_argument("--tree", type=Path, default=None,
                        help="start the broker of this checkout (a before/after comparison in one run)")
    add_point_arguments(parser)
    parser.add_argument("--count", type=int, default=300_000, help="messages in all (default 300000)")
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                        help="the broker's flush mode (default ASYNC_FLUSH)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument("--readers", type=int, default=2, help="the broker's reader processes (default 2)")
    parser.add_argument("--inflight", type=int, default=32,
                        help="batch sends outstanding per producer (default 32, the suite's)")
    args = parser.parse_args(argv)
    if args.tree is not None:
        harness.ROOT = args.tree.resolve()
    if args.points:
        with tempfile.TemporaryDirectory(prefix="mqstore-where-") as work:
            print(json.dumps({"benchmark": "where", "points": load_points(Path(work), args)}, indent=2))
        return 0
    spec = Workload(producers=args.producers, count=args.count, readers=args.readers, inflight=args.inflight)
    with tempfile.TemporaryDirectory(prefix="mqstore-where-") as work:
        broker = harness.BrokerProcess(Path(work) / "store", "--flush", args.flush, "--readers",
                                       str(args.readers), "--remoting", "off").start()  # the load goes over ipc
        try:
            before = actor_threads(broker.store)
            result = run_load(broker.store, spec)
            after = actor_threads(broker.store)
        finally:
            broker.stop()
    send = result.summary["send"]
    out = {"benchmark": "where", "flush": args.flush, "messages": send["messages_ok"], "msgs_per_s": send["msgs_per_s"],
           "producers_us_per_msg": send.get("cpu_us_per_msg"),
           **where(before, after, send["messages_ok"], send["seconds"])}
    print(json.dumps(out, indent=2))
    return 0 if send["failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
