"""The writer's CPU per message with its mapping prefaulted ahead (``[store] prefault_ahead_bytes``)
and without, interleaved in one session.

    python -m mqstore.scripts.bench.prefault [--pairs 3] [--body-bytes 4096 128] [--ahead-mib 8] [--duration 3]

Each pair runs ``bench load``'s workload (``--flush`` mode, 2 producers, batches of 100, encoded wire)
against two fresh brokers, prefault on and off (the order alternates between pairs). The writer's
CPU comes from its process times, and separately its main thread's (the request loop: the prefault
thread's work is in the process figure, not in the loop's), both per message stored, and the bytes
the writer dirtied per message (a page populated for writing counts as dirtied) and the machine's
disk writes per message (all processes: noisy on a shared machine). One JSON
document goes to stdout: every run, and the medians per body size and setting.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import psutil

from mqstore.ipc.transport.control import control_request
from mqstore.scripts import harness
from mqstore.scripts.bench.load import run_load
from mqstore.scripts.cli.bench import workload_from


def _cpu_s(proc: psutil.Process) -> tuple[float, float, int]:
    """The process's CPU seconds, its main thread's, and the bytes it dirtied (written back or not)."""
    times = proc.cpu_times()
    main = next((t for t in proc.threads() if t.id == proc.pid), None)
    return (times.user + times.system, (main.user_time + main.system_time) if main is not None else 0.0,
            proc.io_counters().write_bytes)


def one_run(body_bytes: int, ahead_bytes: int, duration_s: float, mode: str) -> dict[str, Any]:
    args = argparse.Namespace(producers=2, consumers=0, readers=1, body_bytes=body_bytes, batch=100, inflight=4,
                              wire="encoded", topics=1, queues=4, key_share=0.1, tag_share=1.0, rate="max",
                              count=None, duration=duration_s, drain_s=30.0)
    with tempfile.TemporaryDirectory(prefix="mqstore-prefault-") as work:
        config = Path(work) / "broker.toml"
        config.write_text(f"[store]\nprefault_ahead_bytes = {ahead_bytes}\n[flush]\nmode = \"{mode}\"\n")
        broker = harness.BrokerProcess(Path(work) / "store", "--remoting", "off", config=config).start()
        try:
            writer = psutil.Process(int(control_request(broker.store, "status")["actors"]["writer"]["pid"]))
            before, disk_before = _cpu_s(writer), psutil.disk_io_counters()
            summary = run_load(broker.store, workload_from(args), live=False).summary
            after, disk_after = _cpu_s(writer), psutil.disk_io_counters()
            status = control_request(broker.store, "status")["actors"]["writer"]
        finally:
            broker.stop()
    send = summary["send"]
    n = max(send["messages_ok"], 1)
    return {"body_bytes": body_bytes, "prefault_ahead_bytes": ahead_bytes, "messages": send["messages_ok"],
            "writer_cpu_us_per_msg": round((after[0] - before[0]) * 1e6 / n, 2),
            "writer_loop_cpu_us_per_msg": round((after[1] - before[1]) * 1e6 / n, 2),
            "writer_dirtied_bytes_per_msg": round((after[2] - before[2]) / n),
            "disk_written_bytes_per_msg": round((disk_after.write_bytes - disk_before.write_bytes) / n),
            "producers_cpu_us_per_msg": send["cpu_us_per_msg"], "body_mb_per_s": send["body_mb_per_s"],
            "msgs_per_s": send["msgs_per_s"], "prefaulted_bytes": int(status.get("prefaulted", 0))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--body-bytes", type=int, nargs="+", default=[4096, 128])
    parser.add_argument("--ahead-mib", type=int, default=8)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    for pair in range(args.pairs):
        for body_bytes in args.body_bytes:
            order = (args.ahead_mib << 20, 0) if pair % 2 == 0 else (0, args.ahead_mib << 20)
            runs.extend(one_run(body_bytes, ahead, args.duration, args.flush) for ahead in order)
    medians: dict[str, Any] = {}
    for body_bytes in args.body_bytes:
        for label, on in (("on", True), ("off", False)):
            mine = [r for r in runs if r["body_bytes"] == body_bytes and (r["prefault_ahead_bytes"] > 0) == on]
            medians[f"{body_bytes}B_{label}"] = {k: statistics.median(r[k] for r in mine) for k in (
                "writer_cpu_us_per_msg", "writer_loop_cpu_us_per_msg", "writer_dirtied_bytes_per_msg",
                "disk_written_bytes_per_msg",
                "producers_cpu_us_per_msg", "body_mb_per_s", "msgs_per_s")}
    print(json.dumps({"benchmark": "prefault", "medians": medians, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
