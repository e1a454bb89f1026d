"""The writer's send RT around commitlog rolls, with the flush service's spare next file and without.

    python -m mqstore.scripts.bench.roll --dir /tmp/roll [--file-mib 64] [--files 5] [--rounds 3]
                                 [--body-bytes 4096] [--batch 64] [--engine]

Each round runs two fresh brokers one after the other, ``[flush] spare_file`` on and off (the order
alternates between rounds), on a store with small commitlog files so a short run rolls several
times. One producer sends batches one at a time (one in flight) until the log has ``--files`` files,
timing each batch. A batch whose records reach a new file is a roll batch: its RT includes creating
(or adopting) that file; the "window" is the roll batch and the next four, which pay for the new
file's first pages. The writer's CPU per message comes from its process times. One JSON document
goes to stdout.

``--engine`` takes the broker's other processes (and their share of the two cores) out of the
figure: one process appends ``--batch`` x ``--body-bytes`` chunks to a commitlog (``MappedFileQueue``
directly) at the pace of a batch every ``--pace-ms``, timing each append, while a second process
runs the flush service's ``PageWarmer`` loop (ahead-warming, and with the spare on, the spare).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import psutil

from mqstore.engine.log.mapped_file_queue import SPARE_NAME, MappedFileQueue
from mqstore.engine.log.page_warmer import PageWarmer
from mqstore.ipc.client.api import Producer
from mqstore.ipc.transport.control import control_request
from mqstore.scripts import harness

WINDOW_BATCHES = 5
SPARE_READY_S = 30.0
REPORT_WAIT_S = 30.0

CONFIG = """
[store.geometry]
commitlog_file_size = {file_size}

[flush]
spare_file = {spare}
"""


def _actors(store: Path) -> dict[str, Any]:
    status = control_request(store, "status", timeout_ms=2000)
    return dict(status["actors"])


def _adopted_after(store: Path, last_phys: int) -> int:
    """The writer's count of adopted spares, from a report made after the record at ``last_phys``
    (reports come once a stats interval: an older one may not count the last roll)."""
    def fresh() -> dict[str, Any] | None:
        writer: dict[str, Any] = _actors(store)["writer"]
        return writer if int(writer.get("written", 0)) > last_phys else None
    return int(harness.wait_for(fresh, REPORT_WAIT_S, "a writer report after the last send").get("spares_adopted", 0))


def run_one(root: Path, spare: bool, file_size: int, files: int, body_bytes: int, batch: int) -> dict[str, Any]:
    store = root / ("spare" if spare else "inline")
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True)
    config = root / f"{store.name}.toml"
    config.write_text(CONFIG.format(file_size=file_size, spare=str(spare).lower()))
    broker = harness.BrokerProcess(store, "--remoting", "off", config=config).start()
    try:
        writer = psutil.Process(int(_actors(store)["writer"]["pid"]))
        body = os.urandom(body_bytes)
        rts_ms: list[float] = []
        rolls: list[int] = []
        with Producer(store, timeout_ms=60_000) as producer:
            producer.send("Roll", body)  # topic and connections up, the first file made
            if spare:  # the flush service prepares it as it goes: the first roll must find it ready
                harness.wait_for(lambda: (store / "commitlog" / SPARE_NAME).exists(), SPARE_READY_S,
                                 "the flush service's spare next file")
            cpu_before = sum(writer.cpu_times()[:2])
            last_file = 0
            while last_file < files - 1:
                start = time.perf_counter()
                results = producer.send_batch([{"topic": "Roll", "body": body}] * batch)
                rts_ms.append((time.perf_counter() - start) * 1000)
                if not all(r.ok for r in results):
                    raise RuntimeError(f"send failed: {[r for r in results if not r.ok][:1]}")
                now_file = results[-1].phys_offset // file_size
                if now_file != last_file:
                    rolls.append(len(rts_ms) - 1)
                    last_file = now_file
            cpu_s = sum(writer.cpu_times()[:2]) - cpu_before
        adopted = _adopted_after(store, results[-1].phys_offset)
    finally:
        broker.stop()
        shutil.rmtree(store, ignore_errors=True)
    in_window = {i for r in rolls for i in range(r, min(r + WINDOW_BATCHES, len(rts_ms)))}
    steady = sorted(rt for i, rt in enumerate(rts_ms) if i not in in_window)
    return {"spare_file": spare, "batches": len(rts_ms), "rolls": len(rolls), "spares_adopted": adopted,
            "roll_batch_rt_ms": [round(rts_ms[r], 2) for r in rolls],
            "roll_window_max_rt_ms": [round(max(rts_ms[r:r + WINDOW_BATCHES]), 2) for r in rolls],
            "steady_rt_median_ms": round(statistics.median(steady), 3),
            "steady_rt_p99_ms": round(steady[int(len(steady) * 0.99) - 1], 3),
            "steady_rt_max_ms": round(steady[-1], 2),
            "writer_cpu_us_per_msg": round(cpu_s / (len(rts_ms) * batch) * 1e6, 2)}


def _warmer_loop(directory: str, file_size: int, spare: bool, written_end: Any, stop: Any) -> None:
    """The flush service's warming, alone: a few steps per round, a round every millisecond."""
    warmer = PageWarmer(Path(directory), file_size, spare=spare)
    try:
        while not stop.is_set():
            for _ in range(16):
                if not warmer.warm(written_end.value) and not warmer.prepare_spare(written_end.value):
                    break
            time.sleep(0.001)
    finally:
        warmer.close()


def run_engine(root: Path, spare: bool, file_size: int, files: int, chunk_bytes: int, pace_ms: float
               ) -> dict[str, Any]:
    directory = root / ("spare" if spare else "inline") / "commitlog"
    shutil.rmtree(directory.parent, ignore_errors=True)
    directory.mkdir(parents=True)
    ctx = multiprocessing.get_context("spawn")
    written_end, stop = ctx.Value("q", 0), ctx.Event()
    warmer = ctx.Process(target=_warmer_loop, args=(str(directory), file_size, spare, written_end, stop))
    warmer.start()
    queue = MappedFileQueue.open(directory, file_size)
    queue.adopt_spares = True
    chunk = os.urandom(chunk_bytes)
    times_us: list[float] = []
    rolls: list[int] = []
    try:
        if spare:  # the warmer up and its first spare made, so the first roll can adopt it
            harness.wait_for(lambda: (directory / SPARE_NAME).exists(), SPARE_READY_S, "the warmer's spare next file")
        next_at = time.perf_counter()
        while len(queue.files) < files:
            next_at += pace_ms / 1000
            time.sleep(max(0.0, next_at - time.perf_counter()))
            start = time.perf_counter()
            count = len(queue.files)
            mf = queue.last_file_for_append(0)
            if mf.free_bytes < chunk_bytes:
                mf.append_blank_tail(bytes(8))
                mf = queue.last_file_for_append(0)
            mf.append(chunk)
            times_us.append((time.perf_counter() - start) * 1e6)
            if len(queue.files) != count and count:
                rolls.append(len(times_us) - 1)
            written_end.value = queue.max_offset
    finally:
        stop.set()
        warmer.join(30)
        adopted = queue.spares_adopted
        queue.close()
        shutil.rmtree(directory.parent, ignore_errors=True)
    steady = sorted(t for i, t in enumerate(times_us) if i not in rolls)
    return {"spare_file": spare, "appends": len(times_us), "rolls": len(rolls), "spares_adopted": adopted,
            "roll_append_us": [round(times_us[r]) for r in rolls],
            "steady_append_median_us": round(statistics.median(steady), 1),
            "steady_append_max_us": round(steady[-1])}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, required=True, help="scratch directory (its stores are removed)")
    parser.add_argument("--file-mib", type=int, default=64, help="commitlog file size in MiB")
    parser.add_argument("--files", type=int, default=5, help="send until the log has this many files")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each mode")
    parser.add_argument("--body-bytes", type=int, default=4096, help="bytes in each message body")
    parser.add_argument("--batch", type=int, default=64, help="messages per send")
    parser.add_argument("--engine", action="store_true", help="the writer's appends alone, without a broker")
    parser.add_argument("--pace-ms", type=float, default=3.0, help="--engine: one batch every this long")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    if args.engine:
        return engine_main(args)
    runs = []
    for round_no in range(args.rounds):
        for spare in ((True, False) if round_no % 2 == 0 else (False, True)):
            runs.append({"round": round_no, **run_one(args.dir, spare, args.file_mib << 20, args.files,
                                                      args.body_bytes, args.batch)})
    summary = {}
    for spare in (True, False):
        mine = [r for r in runs if r["spare_file"] is spare]
        roll_rts = [rt for r in mine for rt in r["roll_batch_rt_ms"]]
        window = [rt for r in mine for rt in r["roll_window_max_rt_ms"]]
        summary["spare" if spare else "inline"] = {
            "rolls": len(roll_rts), "spares_adopted": sum(r["spares_adopted"] for r in mine),
            "roll_batch_rt_median_ms": round(statistics.median(roll_rts), 2),
            "roll_batch_rt_max_ms": max(roll_rts), "roll_window_max_rt_ms": max(window),
            "steady_rt_median_ms": round(statistics.median(r["steady_rt_median_ms"] for r in mine), 3),
            "writer_cpu_us_per_msg": round(statistics.median(r["writer_cpu_us_per_msg"] for r in mine), 2)}
    print(json.dumps({"file_mib": args.file_mib, "body_bytes": args.body_bytes, "batch": args.batch,
                      "window_batches": WINDOW_BATCHES, "summary": summary, "runs": runs}, indent=1))
    return 0


def engine_main(args: argparse.Namespace) -> int:
    runs = []
    for round_no in range(args.rounds):
        for spare in ((True, False) if round_no % 2 == 0 else (False, True)):
            runs.append({"round": round_no, **run_engine(args.dir, spare, args.file_mib << 20, args.files,
                                                         args.body_bytes * args.batch, args.pace_ms)})
    summary = {}
    for spare in (True, False):
        mine = [r for r in runs if r["spare_file"] is spare]
        roll_us = [t for r in mine for t in r["roll_append_us"]]
        summary["spare" if spare else "inline"] = {
            "rolls": len(roll_us), "spares_adopted": sum(r["spares_adopted"] for r in mine),
            "roll_append_median_us": statistics.median(roll_us), "roll_append_max_us": max(roll_us),
            "steady_append_median_us": statistics.median(r["steady_append_median_us"] for r in mine)}
    print(json.dumps({"mode": "engine", "file_mib": args.file_mib, "chunk_bytes": args.body_bytes * args.batch,
                      "pace_ms": args.pace_ms, "summary": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
