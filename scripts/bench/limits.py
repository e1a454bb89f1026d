"""This machine's limits, measured in the same run as the load, so every figure has a ratio that holds.

    mqstore bench limits [--dir DIR] [--quick]

- ``mmap_copy_mb_per_s``: a numpy copy into a fresh, fallocated shared mapping (what an append costs
  at best; ``mmap_copy_bandwidth``, which ``mqstore.scripts.bench.put_batch`` compares with too);
- ``seq_write_fdatasync_mb_per_s``: sequential 4 MiB writes of a fresh file, then one fdatasync (what
  a flushed commitlog can take at best);
- ``fdatasync_appends_per_s``: small appends each followed by fdatasync (a sync send without group
  commit; ``fdatasync_rate``, which ``mqstore.scripts.bench.e2e`` compares with too);
- ``ipc_batch_round_trip_us``: a ZeroMQ ipc DEALER/ROUTER round trip of one batch-sized frame
  (``ipc_round_trip_us``), and the messages/s one synchronous producer could reach with it.

Each probe is a function of its own here, so the benchmarks that put a figure next to a limit
measure it the same way.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import zmq

CHUNK_BYTES = 4 * 1024 * 1024


def mmap_copy_bandwidth(directory: Path, size_bytes: int = 256 * 1024 * 1024, rounds: int = 3) -> float:
    """Bytes/s of copying a numpy buffer into a fresh, fallocated, shared mapping (best of rounds)."""
    src = np.random.default_rng(1).integers(0, 255, size_bytes, dtype=np.uint8)
    best = 0.0
    for i in range(rounds):
        path = directory / f"mmap-bw-{i}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.posix_fallocate(fd, 0, size_bytes)
            mm = mmap.mmap(fd, size_bytes)
            dst = np.frombuffer(mm, dtype=np.uint8)
            start = time.perf_counter()
            dst[:] = src
            elapsed = time.perf_counter() - start
            del dst
            mm.close()
        finally:
            os.close(fd)
            path.unlink()
        best = max(best, size_bytes / elapsed)
    return best


def ipc_round_trip_us(directory: Path, rounds: int = 5000, payload_bytes: int = 128) -> float:
    """Microseconds of one DEALER -> ROUTER -> DEALER round trip of a ``payload_bytes`` frame."""
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        server = ctx.socket(zmq.ROUTER)
        server.bind(f"ipc://{directory}/rt.sock")
        client = ctx.socket(zmq.DEALER)
        client.connect(f"ipc://{directory}/rt.sock")
        stop = threading.Event()

        def echo() -> None:
            while not stop.is_set():
                if server.poll(100):
                    server.send_multipart(server.recv_multipart())
        thread = threading.Thread(target=echo, daemon=True)
        thread.start()
        client.send(b"x")
        client.recv()
        payload = b"x" * payload_bytes
        start = time.perf_counter()
        for _ in range(rounds):
            client.send(payload)
            client.recv()
        elapsed = time.perf_counter() - start
        stop.set()
        thread.join()
        return elapsed / rounds * 1e6
    finally:
        ctx.destroy(linger=0)
        (directory / "rt.sock").unlink(missing_ok=True)  # ZeroMQ leaves the ipc socket file behind


def fdatasync_rate(directory: Path, appends: int = 500) -> float:
    """Small appends per second, each made durable with fdatasync."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(appends):
            os.write(fd, b"x" * 128)
            os.fdatasync(fd)
        return appends / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def seq_write_fdatasync_bandwidth(directory: Path, size_bytes: int = 512 * 1024 * 1024) -> float:
    """Bytes/s of writing a fresh file sequentially and making it durable with one fdatasync."""
    path = directory / "seq-write-probe"
    chunk = os.urandom(CHUNK_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        written = 0
        while written < size_bytes:
            written += os.write(fd, chunk)
        os.fdatasync(fd)
        return written / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def measure_limits(directory: Path, *, batch: int = 100, body_bytes: int = 128, quick: bool = False) -> dict[str, Any]:
    mb = 1e6
    copy_bytes = (32 if quick else 256) * 1024 * 1024
    seq_bytes = (32 if quick else 512) * 1024 * 1024
    rtt_us = ipc_round_trip_us(directory, rounds=500 if quick else 5000, payload_bytes=batch * (body_bytes + 40))
    return {
        "mmap_copy_mb_per_s": round(mmap_copy_bandwidth(directory, copy_bytes, rounds=1 if quick else 3) / mb, 1),
        "seq_write_fdatasync_mb_per_s": round(seq_write_fdatasync_bandwidth(directory, seq_bytes) / mb, 1),
        "fdatasync_appends_per_s": round(fdatasync_rate(directory, 100 if quick else 500)),
        "ipc_batch_round_trip_us": round(rtt_us, 1),
        "ipc_batch": {"messages": batch, "frame_bytes": batch * (body_bytes + 40)},
        "ipc_one_producer_msgs_per_s": round(batch / rtt_us * 1e6),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, default=None, help="where the probes write (default: a temp dir)")
    parser.add_argument("--batch", type=int, default=100, help="messages per send")
    parser.add_argument("--body-bytes", type=int, default=128, help="bytes in each message body")
    parser.add_argument("--quick", action="store_true", help="small probes (seconds)")


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="mqstore-limits-", dir=args.dir) as work:
        limits = measure_limits(Path(work), batch=args.batch, body_bytes=args.body_bytes, quick=args.quick)
    print(json.dumps({"benchmark": "limits", "machine": {"cpus": os.cpu_count()}, "limits": limits}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
