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
import tempfile
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqstore.scripts.bench.where", description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=300_000, help="messages in all (default 300000)")
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                        help="the broker's flush mode (default ASYNC_FLUSH)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument("--readers", type=int, default=2, help="the broker's reader processes (default 2)")
    parser.add_argument("--inflight", type=int, default=32,
                        help="batch sends outstanding per producer (default 32, the suite's)")
    args = parser.parse_args(argv)
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
