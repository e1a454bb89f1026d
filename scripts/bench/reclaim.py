"""Disk use over time for an ack-heavy workload, with retention's ``reclaim_consumed`` on and off,
and what moving stragglers (``move_stragglers_below``) costs when some messages are never acked.

    python -m mqstore.scripts.bench.reclaim [--duration-s 30] [--rate 2000] [--body-bytes 1024] [--file-mib 4]
                                    [--clean-interval-ms 1000] [--stragglers-every 0] [--move-below 0.5]
                                    [--png docs/reclaim-disk.png]

Per setting, a real broker (``mqstore.scripts.harness``) on a fresh store in a temp dir with
``--file-mib`` commitlog files; for ``--duration-s`` a producer sends ``--rate`` messages per second
to a 4-queue topic while an ack-mode group (one ``AckConsumer``, every batch acked at once) and an
offset-mode group (one ``Consumer``, committing every second) keep up with it. Every
``SAMPLE_S`` the bytes of the commitlog files present are sampled; after the producer stops the
sampling goes on for ``--tail-s`` while the consumers finish. The writer's CPU seconds over the run
(``mqstore.scripts.bench.cpu``) say what the reclamation rounds cost it.

With ``--stragglers-every N`` the ack-mode group leaves one message in N unacked (held in flight
for the whole run, as a forgotten message would be), and three settings run: reclamation with
stragglers moved (``--move-below``), reclamation alone, and neither. Each run also reports what the
writer moved (messages, bytes re-appended) and how many commitlog files were deleted.

Prints one JSON object (the samples of both runs, the last and peak commitlog bytes, the writer's
and the readers' CPU seconds) and, with ``--png``, plots commitlog bytes against time for both.
Not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Consumer, Producer
from mqstore.scripts import harness
from mqstore.scripts.bench.cpu import actor_cpu_s, cpu_since

TOPIC = "BenchReclaim"
SAMPLE_S = 0.5
BATCH = 50
QUEUES = [0, 1, 2, 3]
STRAGGLER_PREFETCH = 8192  # in flight per queue: room for every straggler left unacked


def commitlog_bytes(store: Path) -> int:
    directory = store / "commitlog"
    return sum(p.stat().st_size for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else 0


def _produce(store: Path, rate: int, body_bytes: int, duration_s: float, sent: list[int]) -> None:
    body = os.urandom(body_bytes)
    started = time.monotonic()
    with Producer(store, timeout_ms=30_000) as producer:
        while (elapsed := time.monotonic() - started) < duration_s:
            due = int(elapsed * rate) - sent[0]
            if due < BATCH:
                time.sleep(BATCH / rate / 4)
                continue
            results = producer.send_batch([{"topic": TOPIC, "body": body}] * BATCH)
            sent[0] += sum(r.ok for r in results)


def _ack(store: Path, stop: threading.Event, acked: list[int], every: int) -> None:
    prefetch = STRAGGLER_PREFETCH if every else None
    with AckConsumer(store, group="AckGroup", topic=TOPIC, queues=QUEUES, visibility_ms=3_600_000,
                     prefetch=prefetch) as consumer:
        while not stop.is_set():
            batch = consumer.receive(256, timeout_ms=200)
            done = [d for d in batch if not every or d.queue_offset % every]
            if done:
                consumer.ack(done)
                acked[0] += len(done)


def _offsets(store: Path, stop: threading.Event, consumed: list[int]) -> None:
    with Consumer(store, group="OffsetGroup", topic=TOPIC, queues=QUEUES, auto_commit_interval_ms=1000) as c:
        while not stop.is_set():
            consumed[0] += len(c.poll(200, 1024))


def _files(store: Path) -> set[str]:
    directory = store / "commitlog"
    return {p.name for p in directory.iterdir() if p.name.isdigit()} if directory.is_dir() else set()


def run_one(root: Path, *, reclaim: bool, move_below: float, args: argparse.Namespace) -> dict[str, Any]:
    root.mkdir(parents=True)
    every = args.stragglers_every
    (root / "broker.toml").write_text(
        f"[store.geometry]\ncommitlog_file_size = {args.file_mib << 20}\n"
        f"[broker]\nclean_interval_ms = {args.clean_interval_ms}\noffset_persist_interval_ms = 1000\n"
        f"default_queues = 4\nack_prefetch = {STRAGGLER_PREFETCH if every else 64}\n"
        f"[retention]\nreclaim_consumed = {str(reclaim).lower()}\nmove_stragglers_below = {move_below}\n")
    seen: set[str] = set()
    broker = harness.BrokerProcess(root / "store", "--remoting", "off", config=root / "broker.toml",
                                   log_path=root / "broker.log")
    samples: list[list[float]] = []
    sent, acked, consumed = [0], [0], [0]
    with broker:
        with Producer(broker.store) as producer:  # every queue has an entry before the consumers look for them
            producer.send_batch([{"topic": TOPIC, "body": b"first", "queue_id": q} for q in QUEUES])
        sent[0] = len(QUEUES)
        stop = threading.Event()
        workers = [threading.Thread(target=_ack, args=(broker.store, stop, acked, every)),
                   threading.Thread(target=_offsets, args=(broker.store, stop, consumed))]
        for w in workers:
            w.start()
        cpu_before = actor_cpu_s(broker.store)
        producer_thread = threading.Thread(target=_produce, args=(broker.store, args.rate, args.body_bytes,
                                                                  args.duration_s, sent))
        started = time.monotonic()
        producer_thread.start()
        end = started + args.duration_s + args.tail_s
        while (now := time.monotonic()) < end:
            samples.append([round(now - started, 2), commitlog_bytes(broker.store), sent[0], acked[0], consumed[0]])
            seen |= _files(broker.store)
            time.sleep(SAMPLE_S)
        producer_thread.join()
        cpu = cpu_since(cpu_before, actor_cpu_s(broker.store))
        status = broker.status() or {}
        moved = status.get("actors", {}).get("writer", {}).get("moved") or {}
        deleted = len(seen - _files(broker.store))
        stop.set()
        for w in workers:
            w.join()
        broker.stop()
    return {"reclaim_consumed": reclaim, "move_stragglers_below": move_below, "stragglers_every": every,
            "moved_messages": moved.get("messages", 0), "moved_bytes": moved.get("bytes", 0),
            "files_deleted": deleted, "sent": sent[0], "acked": acked[0], "consumed": consumed[0],
            "last_commitlog_bytes": samples[-1][1], "peak_commitlog_bytes": max(s[1] for s in samples),
            "written_bytes_approx": sent[0] * (args.body_bytes + 100),
            "cpu_s": {name: round(s, 3) for name, s in sorted(cpu.items())},
            "samples": {"columns": ["t_s", "commitlog_bytes", "sent", "acked", "consumed"], "rows": samples}}


def plot(path: Path, runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in runs:
        rows = run["samples"]["rows"]
        label = "reclaim_consumed = " + ("true" if run["reclaim_consumed"] else "false (RocketMQ's default)")
        if run["move_stragglers_below"]:
            label += f", move_stragglers_below = {run['move_stragglers_below']}"
        ax.plot([r[0] for r in rows], [r[1] / 2**20 for r in rows], label=label)
    ax.axvline(args.duration_s, color="grey", linestyle=":", label="producer stops")
    ax.set_xlabel("seconds")
    ax.set_ylabel("commitlog MiB on disk")
    acked = f"all but 1 in {args.stragglers_every} acked at once" if args.stragglers_every \
        else "every message acked at once"
    ax.set_title(f"ack-heavy load: {args.rate} msg/s of {args.body_bytes} B, {acked}; "
                 f"{args.file_mib} MiB files", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration-s", type=float, default=30.0, help="how long the producer sends")
    parser.add_argument("--tail-s", type=float, default=8.0, help="sampling goes on this long after it stops")
    parser.add_argument("--rate", type=int, default=2000, help="messages per second")
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--file-mib", type=int, default=4, help="commitlog file size")
    parser.add_argument("--clean-interval-ms", type=int, default=1000, help="[broker] clean_interval_ms")
    parser.add_argument("--stragglers-every", type=int, default=0,
                        help="leave one message in this many unacked (0: ack every one)")
    parser.add_argument("--move-below", type=float, default=0.5,
                        help="[retention] move_stragglers_below of the run that moves stragglers")
    parser.add_argument("--png", type=Path, help="plot commitlog bytes over time for every run here")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mqstore-reclaim-") as tmp:
        settings = [(True, 0.0), (False, 0.0)]
        if args.stragglers_every:
            settings.insert(0, (True, args.move_below))
        runs = [run_one(Path(tmp) / f"{'on' if reclaim else 'off'}-{move_below}", reclaim=reclaim,
                        move_below=move_below, args=args) for reclaim, move_below in settings]
    if args.png is not None:
        plot(args.png, runs, args)
    print(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}))


if __name__ == "__main__":
    main()
