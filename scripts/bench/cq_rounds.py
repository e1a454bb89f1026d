"""The consume-queue builder's poll round, replayed offline: Python calls, numpy calls and CPU a round.

    python -m mqstore.scripts.bench.cq_rounds [--count 300000] [--producers 2] [--repeat 3]

Starts a broker on a temp store (``mqstore.scripts.harness``), runs ``bench load``'s workload against it (the
suite's: ``send_encoded_columns``, batches of 100, 128 B, tags, keys on 10 %) while a subscriber
records every frame the writer publishes on ``dispatch``, and keeps the commitlog. Then, in this
process, a ``ConsumeQueueBuilderActor`` on a copy of that commitlog (no consume queues yet) applies
the recorded dispatch frames one poll round each, as the live builder does under load (its rounds wait
for nothing: one writer frame a round), building its ``arrived`` notice after each: first under cProfile
(every Python and C call of a round, those of numpy apart), then ``--repeat`` times on fresh copies
for CPU seconds (the best). The consume-queue files it writes are compared with the broker's, byte
for byte. What a live round costs beyond this (wake-ups, ZeroMQ, caches gone cold between rounds)
is ``mqstore.scripts.bench.where``'s. One JSON document on stdout.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.builder import ConsumeQueueBuilderActor, Received
from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.engine.read.store_files import read_geometry
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.transport.sockets import connect, has_message, recv_message
from mqstore.ipc.wire import schema
from mqstore.scripts import harness
from mqstore.scripts.bench.load import Workload, run_load

Frame = Received


def record(work: Path, spec: Workload) -> list[Frame]:
    """Every dispatch frame of one load run; the broker's store stays in ``work/store``."""
    # no remoting front: its fixed TCP port would collide with another broker's on this machine
    broker = harness.BrokerProcess(work / "store", "--readers", str(spec.readers), "--remoting", "off").start()
    frames: list[Frame] = []
    stop = threading.Event()
    ctx: zmq.Context[Any] = zmq.Context()
    sub = connect(ctx, zmq.SUB, Endpoints.for_store(str(broker.store)).dispatch, hwm=0, subscribe=(schema.DISPATCH,))

    def listen() -> None:  # until stopped and drained
        while sub.poll(100) or not stop.is_set():
            while has_message(sub):
                (topic, frame), parts = recv_message(sub, head=2)
                frames.append((topic, frame, parts))

    listener = threading.Thread(target=listen)
    listener.start()
    try:
        run_load(broker.store, spec)
    finally:
        stop.set()
        listener.join()
        ctx.destroy(linger=0)
        broker.stop()
    return frames


def _builder(store: Path, work: Path) -> ConsumeQueueBuilderActor:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copytree(store / "commitlog", work / "commitlog")
    geometry = asdict(read_geometry(store))
    builder = ConsumeQueueBuilderActor(Runtime("cqbuilder", load_config(work, None, store={"geometry": geometry}),
                                               zmq.Context()))
    builder.applied = max(builder.resume_from(), builder.commitlog.min_offset)
    return builder


def _close(builder: ConsumeQueueBuilderActor) -> None:
    builder.close()
    builder.rt.close()  # its context and stop pipe


def _rounds(builder: ConsumeQueueBuilderActor, frames: list[Frame]) -> None:
    for frame in frames:
        if builder._on_round([frame]):
            builder.notice().frames()


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def replay(store: Path, work: Path, frames: list[Frame], repeat: int) -> dict[str, Any]:
    builder = _builder(store, work)
    profile = cProfile.Profile()
    profile.enable()
    _rounds(builder, frames)
    profile.disable()
    _close(builder)
    same = _files(store / "consumequeue") == _files(work / "consumequeue")
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    calls = sum(v[1] for v in stats.values())
    numpy_calls = sum(v[1] for k, v in stats.items() if "numpy" in k[0] or "numpy" in k[2])
    cpu_s = []
    for _ in range(repeat):
        builder = _builder(store, work)
        begin = time.process_time()
        _rounds(builder, frames)
        cpu_s.append(time.process_time() - begin)
        _close(builder)
    rounds = len(frames)
    return {"rounds": rounds, "calls_per_round": round(calls / rounds, 1),
            "numpy_calls_per_round": round(numpy_calls / rounds, 1),
            "cpu_us_per_round": round(min(cpu_s) / rounds * 1e6, 1), "files_same_as_broker": same}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqstore.scripts.bench.cq_rounds",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=300_000, help="messages in all (default 300000)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="timed replays, the best kept (default 3)")
    args = parser.parse_args(argv)
    spec = Workload(producers=args.producers, count=args.count, readers=2)
    with tempfile.TemporaryDirectory(prefix="mqstore-cq-rounds-") as tmp:
        work = Path(tmp)
        frames = record(work, spec)
        out = replay(work / "store", work / "replay", frames, args.repeat)
    out["messages"] = args.count
    out["cpu_us_per_message"] = round(out["cpu_us_per_round"] * out["rounds"] / args.count, 3)
    print(json.dumps({"benchmark": "cq_rounds", **out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
