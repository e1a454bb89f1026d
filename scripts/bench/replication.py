"""Replication's cost: a single broker, an ASYNC_MASTER with a slave and a SYNC_MASTER with a slave,
under the suite's workload, both brokers of a pair on this machine, in one run.

    python -m mqstore.scripts.bench.replication [--seconds 10] [--rounds 2] [--out docs/benchmarks] [--name NAME]
    mqstore bench replication ...

The three setups run in turn, ``--rounds`` times (single, async, sync, single, async, sync, ...), each
on fresh stores with the same load for the same time: the suite's (128-byte bodies, k producers,
batches of ``--batch``, ``--inflight`` batches outstanding, tags on, keys on 10 %; k = the core count).
A master serves its HA port on loopback (``--role ... --ha-port``) and its slave follows it
(``--role SLAVE --broker-id 1 --master``); the load starts once the slave is in sync.

Figures per run: messages acknowledged per second (SEND_OK); the replication lag
(``mqstore.scripts.bench.replica_lag``: bytes between the master's and the slave's ends, sampled; ms
from a probe message's SEND_OK to the slave's end passing it; the master's ``ha`` report); the CPU
per message acknowledged of every process of both trees (psutil, from the window's start until the
slave has caught up), the master's and the slave's ``ha`` actors and the writer apart, and the sums.
Per setup the median over the rounds with its min and max (the spread is the noise), and the ratios:
ASYNC_MASTER and SYNC_MASTER over the single broker, SYNC_MASTER over ASYNC_MASTER. The machine's own
limit, measured in the same run: what the kernel charges a sender to push a message's bytes over
loopback TCP with 32 KiB sendmsg calls of a mapped buffer (the floor under the HA sender's CPU).
Two brokers share this machine's cores, so every rate stands beside the CPU it cost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from mqstore.ipc.transport.control import control_request
from mqstore.scripts.bench.cpu import actor_cpu_s, cpu_since
from mqstore.scripts.bench.load import Workload, run_load
from mqstore.scripts.bench.loopback import loopback_send_cost
from mqstore.scripts.bench.replica_lag import LagProbe
from mqstore.scripts.bench.where import thread_times, where
from mqstore.scripts.harness import BrokerProcess, free_port_range, wait_for

MODES = ("single", "async_master", "sync_master")
ROLES = {"async_master": "ASYNC_MASTER", "sync_master": "SYNC_MASTER"}
HA_SENDER_GOAL_US = 0.1
SYNC_OVER_ASYNC_GOAL = 0.5
CATCH_UP_S = 120.0


def start_setup(work: Path, mode: str, readers: int, config: Path | None) -> tuple[BrokerProcess, BrokerProcess | None]:
    """The broker (and its slave, in sync) of one setup; the caller stops them."""
    base = ("--flush", "ASYNC_FLUSH", "--readers", str(readers), "--remoting", "off")
    if mode == "single":
        return BrokerProcess(work / "single", *base, config=config).start(), None
    port = free_port_range(1)
    master = BrokerProcess(work / "master", *base, "--role", ROLES[mode], "--ha-port", str(port), config=config,
                           log_path=work / "master.log").start()
    try:
        slave = BrokerProcess(work / "slave", "--readers", "1", "--remoting", "off", "--role", "SLAVE",
                              "--broker-id", "1", "--master", f"127.0.0.1:{port}", config=config,
                              log_path=work / "slave.log").start()
    except BaseException:
        master.stop()
        raise
    wait_for(lambda: (master.status() or {}).get("actors", {}).get("ha", {}).get("in_sync") == 1, 60,
             "the slave to be in sync")
    return master, slave


def ha_threads(stores: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """The ``ha`` actor's threads on each side (``mqstore.scripts.bench.where``), when it runs."""
    out = {}
    for side, store in stores.items():
        pid = control_request(store, "status")["actors"].get("ha", {}).get("pid")
        out[side] = {"ha": thread_times(int(pid))} if pid else {}
    return out


def _cpu(before: dict[str, float], after: dict[str, float], messages: int) -> dict[str, float]:
    return {name: round(s / max(messages, 1) * 1e6, 3) for name, s in sorted(cpu_since(before, after).items())}


def measure_run(work: Path, mode: str, spec: Workload, config: Path | None) -> dict[str, Any]:
    """One setup under the load: rate, lag and CPU per message, both trees."""
    master, slave = start_setup(work, mode, spec.readers, config)
    try:
        stores = {"master": master.store, **({"slave": slave.store} if slave else {})}
        probe = LagProbe(master.store, slave.store) if slave else None
        with contextlib.ExitStack() as stack:
            if probe is not None:
                stack.enter_context(probe)
            before = {side: actor_cpu_s(store) for side, store in stores.items()}
            threads_before = ha_threads(stores)
            started = time.monotonic()
            summary = run_load(master.store, spec).summary
            catch_up_s = 0.0
            if probe is not None:
                wait_for(probe.caught_up, CATCH_UP_S, "the slave to catch up")
                catch_up_s = round(time.monotonic() - started - summary["send"]["seconds"], 3)
            after = {side: actor_cpu_s(store) for side, store in stores.items()}
            threads_after = ha_threads(stores)
    finally:
        for broker in (slave, master):
            if broker is not None:
                broker.stop()
    send = summary["send"]
    messages = send["messages_ok"] + (len(probe.probes) if probe else 0)
    cpu = {side: _cpu(before[side], after[side], messages) for side in stores}
    sums = {"master_ha": cpu["master"].get("ha"), "slave_ha": cpu.get("slave", {}).get("ha"),
            "master_writer": cpu["master"].get("writer"),
            "master_total": round(sum(cpu["master"].values()), 3),
            "slave_total": round(sum(cpu.get("slave", {}).values()), 3)}
    sums["both_total"] = round(sums["master_total"] + sums["slave_total"], 3)
    out: dict[str, Any] = {"mode": mode, "send": {k: send[k] for k in ("messages_ok", "failed", "seconds", "msgs_per_s",
                                                                       "rt_avg_ms", "rt_p99_ms", "rt_max_ms")},
                           "cpu_us_per_msg": cpu, "cpu_sums_us_per_msg": sums}
    if probe is not None:
        seconds = send["seconds"] + catch_up_s
        out["ha_threads"] = {side: where(threads_before[side], threads_after[side], messages, seconds)["actors"]["ha"]
                             for side in stores}
        out["lag"] = probe.result()
        out["catch_up_s"] = catch_up_s
        out["bytes_per_msg"] = round(probe.master_end / max(messages, 1), 1)
    return out


def remove_stores(run_dir: Path) -> None:
    """A finished run's stores (its logs stay beside them, for a run that went wrong)."""
    for store in ("single", "master", "slave"):
        shutil.rmtree(run_dir / store, ignore_errors=True)


def _spread(values: list[float]) -> dict[str, Any]:
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "each": []}
    return {"median": round(statistics.median(values), 3), "min": min(values), "max": max(values), "each": values}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per setup the median, min and max over the rounds of each figure the goals and the table use."""
    out: dict[str, Any] = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        row = {"msgs_per_s": _spread([r["send"]["msgs_per_s"] for r in mine]),
               **{f"cpu_{k}_us_per_msg": _spread([r["cpu_sums_us_per_msg"][k] for r in mine])
                  for k in ("master_ha", "slave_ha", "master_writer", "master_total", "slave_total", "both_total")}}
        if mode != "single":
            for unit in ("bytes", "ms"):
                for q in ("p50", "p99", "max"):
                    row[f"lag_{unit}_{q}"] = _spread([r["lag"][unit][q] for r in mine])
        out[mode] = row
    return out


def ratios(summary: dict[str, Any]) -> dict[str, float | None]:
    rate = {m: summary.get(m, {}).get("msgs_per_s", {}).get("median") for m in MODES}

    def over(a: str, b: str) -> float | None:
        return round(rate[a] / rate[b], 3) if rate[a] is not None and rate[b] else None
    return {"async_master_over_single": over("async_master", "single"),
            "sync_master_over_single": over("sync_master", "single"),
            "sync_master_over_async_master": over("sync_master", "async_master")}


def goals(summary: dict[str, Any], ratio: dict[str, float | None], limit: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal beside its figure, met or not (not met when the figure is missing)."""
    sender = {m: summary.get(m, {}).get("cpu_master_ha_us_per_msg", {}).get("median") for m in ROLES}
    sync_async = ratio["sync_master_over_async_master"]
    return [
        {"goal": "the master's HA sender CPU per message", "target": f"<= {HA_SENDER_GOAL_US} us",
         "achieved": {**{f"{m}_us": v for m, v in sender.items()},
                      "loopback_floor_us": limit.get("sender_us_per_msg")},
         "met": all(v is not None and v <= HA_SENDER_GOAL_US for v in sender.values())},
        {"goal": "SYNC_MASTER's rate over ASYNC_MASTER's", "target": f">= {SYNC_OVER_ASYNC_GOAL}x (RocketMQ: 0.1x "
         "before it pipelined the two waits)", "achieved": {"ratio": sync_async, **ratio},
         "met": sync_async is not None and sync_async >= SYNC_OVER_ASYNC_GOAL},
    ]


def measure(work: Path, *, seconds: float, rounds: int, procs: int, batch: int = 100, inflight: int = 32,
            config: Path | None = None, modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """The whole comparison, in a report (what the suite embeds as its replication section)."""
    spec = Workload(producers=procs, readers=procs, count=None, duration_s=seconds, batch=batch, inflight=inflight)
    runs = []
    for r in range(rounds):
        for mode in modes:
            run_dir = work / f"{mode}-{r}"
            run_dir.mkdir(parents=True)
            runs.append({"round": r, **measure_run(run_dir, mode, spec, config)})
            remove_stores(run_dir)  # GiBs a run: the next runs' disk, not this one's leftovers
    bytes_per_msg = statistics.median([r["bytes_per_msg"] for r in runs if "bytes_per_msg" in r] or [230])
    limit = loopback_send_cost(int(bytes_per_msg))
    summary = summarize(runs)
    ratio = ratios(summary)
    return {"workload": {"producers": procs, "readers": procs, "body_bytes": spec.body_bytes, "batch": batch,
                         "inflight": inflight, "seconds": seconds, "rounds": rounds, "key_share": spec.key_share},
            "limits": limit, "goals": goals(summary, ratio, limit), "ratios": ratio, "summary": summary, "runs": runs}


def section(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The suite's replication section, on the suite's workload: a failure is its report (the error),
    never the end of the suite."""
    try:
        return measure(work / "replication", seconds=args.seconds, rounds=args.replication_rounds, procs=args.procs,
                       batch=args.batch, inflight=args.inflight, config=args.config)
    except Exception as exc:  # the rest of the suite stands without this section
        return {"error": f"{type(exc).__name__}: {exc}"}


def suite_rows(report: dict[str, Any] | None) -> list[tuple[str, str, Any, bool]]:
    """The goals as rows of the suite's targets table (one row saying why, when the section failed)."""
    if not report or "error" in report:
        return [("replication", "the section ran", (report or {}).get("error", "not run"), False)]
    return [(f"replication: {g['goal']}", g["target"], g["achieved"], g["met"]) for g in report["goals"]]


def add_suite_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replication-rounds", type=int, default=2, help="times the replication setups run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 1, help="k: producers and readers")
    parser.add_argument("--seconds", type=float, default=10.0, help="sending time of each run")
    parser.add_argument("--rounds", type=int, default=2, help="times the three setups run, in turn")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="the setups run (all three)")
    parser.add_argument("--batch", type=int, default=100, help="messages per send")
    parser.add_argument("--inflight", type=int, default=32, help="batch sends outstanding per producer")
    parser.add_argument("--out", type=Path, default=None, help="write {name}.json there too")
    parser.add_argument("--name", default=None, help="file name stem (default replication-{commit})")
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--config", type=Path, default=None, help="every broker's config file")


def run(args: argparse.Namespace) -> int:
    from mqstore.scripts.bench.suite import git_commit
    commit = git_commit()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="mqstore-replication-", dir=args.dir) as work:
        report = measure(Path(work), seconds=args.seconds, rounds=args.rounds, procs=args.procs, batch=args.batch,
                         inflight=args.inflight, config=args.config, modes=tuple(args.modes))
    doc = {"benchmark": "replication", "commit": commit,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_avg_after": [round(x, 2) for x in os.getloadavg()]},
           "seconds": round(time.time() - started), **report}
    text = json.dumps(doc, indent=2) + "\n"
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.name or f'replication-{commit}'}.json").write_text(text)
    print(text, end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqstore.scripts.bench.replication",
                                     description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
