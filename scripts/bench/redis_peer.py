"""The peer in the same run: Redis Streams doing the load generator's workload.

    mqstore bench redis [--producers N] [--count N] [--body-bytes 128] [--install]

A private ``redis-server`` (unix socket, append-only file in a temp dir, no RDB snapshots) runs once
with ``appendfsync everysec`` (the peer of ASYNC_FLUSH) and once with ``always`` (the peer of
SYNC_FLUSH). N producer processes each send pipelined ``XADD`` commands, ``--pipeline`` (100) per
round trip, with the same fields a message carries (body, tags on every message, a key on 10 %), one
stream per topic. The redis-server process's own CPU time (psutil, every thread) over the XADDs is
reported per message beside the producers', the figure the broker's CPU per message is set against.
Needs ``redis-server`` (``--install`` runs ``apt-get install -y redis-server``)
and the ``redis`` Python package (``pip install -e '.[bench]'``); without them the result says
``skipped`` and why.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import multiprocess

from mqstore.scripts.bench.cpu import process_cpu_s

PIPELINE = 100
FSYNC_MODES = ("everysec", "always")


def available(install: bool = False) -> str | None:
    """None when the peer can run, else why not."""
    if shutil.which("redis-server") is None and install:
        subprocess.run(["apt-get", "install", "-y", "redis-server"], check=False, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (--install-redis runs apt-get install -y redis-server)"
    try:
        import redis  # noqa: F401
    except ImportError:
        return "the redis Python package is not installed (pip install -e '.[bench]')"
    return None


class RedisServer:
    def __init__(self, directory: Path, appendfsync: str) -> None:
        self._socket_dir = Path(tempfile.mkdtemp(prefix="mqr-"))  # unix socket paths must stay short
        self.socket = self._socket_dir / "redis.sock"
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700",
             "--dir", str(directory), "--appendonly", "yes", "--appendfsync", appendfsync, "--save", "",
             "--daemonize", "no", "--loglevel", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis
        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis(unix_socket_path=str(self.socket)).ping()
                return
            except (redis.ConnectionError, FileNotFoundError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self._socket_dir, ignore_errors=True)


def _producer(worker: int, socket_path: str, count: int, body_bytes: int, topics: int, pipeline: int,
              start_at: float, out: Any) -> None:
    import redis
    client = redis.Redis(unix_socket_path=socket_path)
    filler = os.urandom(body_bytes)
    while time.time() < start_at:
        time.sleep(0.001)
    start, cpu_start = time.perf_counter(), time.process_time()
    sent = 0
    while sent < count:
        n = min(pipeline, count - sent)
        pipe = client.pipeline(transaction=False)
        for i in range(sent, sent + n):
            fields: dict[str, Any] = {"body": filler, "tags": "TagA" if i % 2 else "TagB"}
            if i % 10 == 0:
                fields["keys"] = f"k{worker}-{i}"
            pipe.xadd(f"Bench{(worker + i) % topics}", fields)  # type: ignore[arg-type]
        pipe.execute()
        sent += n
    out.put((worker, start, time.perf_counter(), sent, time.process_time() - cpu_start))


def redis_rate(directory: Path, appendfsync: str, *, producers: int, count: int, body_bytes: int, topics: int = 1,
               pipeline: int = PIPELINE) -> dict[str, Any]:
    server = RedisServer(directory, appendfsync)
    try:
        ctx = multiprocess.get_context("spawn")
        out = ctx.Queue()
        share = count // producers
        start_at = time.time() + 1.0 + 0.2 * producers
        procs = [ctx.Process(target=_producer, args=(i, str(server.socket), share, body_bytes, topics, pipeline,
                                                     start_at, out), daemon=True) for i in range(producers)]
        for p in procs:
            p.start()
        while time.time() < start_at:  # the server's CPU is counted over the XADDs alone
            time.sleep(0.001)
        server_cpu_s = process_cpu_s(server.proc.pid)
        done = [out.get(timeout=600) for _ in procs]
        server_cpu_s = process_cpu_s(server.proc.pid) - server_cpu_s
        for p in procs:
            p.join(10)
    finally:
        server.stop()
    # perf_counter is one system-wide monotonic clock on Linux, so spans from processes compare
    seconds = max(d[2] for d in done) - min(d[1] for d in done)
    total = sum(d[3] for d in done)
    return {"appendfsync": appendfsync, "producers": producers, "messages": total, "pipeline": pipeline,
            "body_bytes": body_bytes, "seconds": round(seconds, 3), "msgs_per_s": round(total / seconds),
            "server_cpu_us_per_msg": round(server_cpu_s / max(total, 1) * 1e6, 2),  # redis-server's own, psutil
            "producers_cpu_us_per_msg": round(sum(d[4] for d in done) / max(total, 1) * 1e6, 2)}


def run_peer(directory: Path, *, producers: int, count: int, body_bytes: int, install: bool = False,
             modes: tuple[str, ...] = FSYNC_MODES, pipeline: int = PIPELINE) -> dict[str, Any]:
    why = available(install)
    if why is not None:  # said on the terminal too: the JSON is read long after the run, if at all
        print(f"the Redis Streams peer was skipped: {why}. To run it: pip install -e '.[bench]' (the redis package) "
              "and redis-server (apt-get install redis-server, or --install-redis)", file=sys.stderr)
        return {"skipped": why}
    runs = {}
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix=f"redis-{mode}-", dir=directory) as work:
            runs[mode] = redis_rate(Path(work), mode, producers=producers, count=count, body_bytes=body_bytes,
                                    pipeline=pipeline)
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    return {"server": version, **runs}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--producers", type=int, default=os.cpu_count() or 1, help="producer processes")
    parser.add_argument("--count", type=int, default=200_000, help="messages in all")
    parser.add_argument("--body-bytes", type=int, default=128, help="bytes in each message body")
    parser.add_argument("--pipeline", type=int, default=PIPELINE, help="XADDs per round trip")
    parser.add_argument("--modes", default=",".join(FSYNC_MODES), help="Redis fsync modes to run, comma-separated")
    parser.add_argument("--install-redis", action="store_true", help="apt-get install -y redis-server if missing")
    parser.add_argument("--dir", type=Path, default=None, help="where Redis writes (default: a temp dir)")


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="mqstore-redis-", dir=args.dir) as work:
        result = run_peer(Path(work), producers=args.producers, count=args.count, body_bytes=args.body_bytes,
                          install=args.install_redis, modes=tuple(args.modes.split(",")),
                          pipeline=args.pipeline)
    print(json.dumps({"benchmark": "redis_streams", "redis": result}, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
