"""A client's round trip, both ways a ``Channel`` makes one: a ping to the writer and to reader 0,
``--calls`` times each, waited for at once on the caller's own socket (``Channel.request``, what
``Admin`` uses) and through the I/O thread (``Channel.call(...).result()``); wall and client CPU
(user + system, every thread of this process) per call. One JSON document on stdout.

    python -m mqstore.scripts.bench.round_trip [--store STORE] [--calls 10000]

Without ``--store`` it starts a broker on a temp store (``mqstore.scripts.harness``) and stops it after.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.ipc.transport.channel import Channel
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.requests import Ping
from mqstore.scripts.harness import BrokerProcess

WARM_CALLS = 500
TIMEOUT_MS = 10_000


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def per_call(call: Callable[[], Any], calls: int) -> dict[str, float]:
    for _ in range(WARM_CALLS):
        call()
    cpu, wall = _cpu_s(), time.perf_counter()
    for _ in range(calls):
        call()
    return {"wall_us": round((time.perf_counter() - wall) * 1e6 / calls, 1),
            "client_cpu_us": round((_cpu_s() - cpu) * 1e6 / calls, 1)}


def measure(store: Path, calls: int) -> dict[str, Any]:
    ep = Endpoints.for_store(str(store), 1)
    channel = Channel({"writer": [ep.ingress], "reader": [ep.reader(0)]}, name="mqstore-round-trip", curve=ep.curve)
    try:
        return {route: {"caller_thread": per_call(lambda r=route: channel.request(r, Ping(), timeout_ms=TIMEOUT_MS),
                                                  calls),
                        "io_thread": per_call(lambda r=route: channel.call(r, Ping(), timeout_ms=TIMEOUT_MS).result(),
                                              calls)}
                for route in ("writer", "reader")}
    finally:
        channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, default=None, help="a running broker's store (default: start one)")
    parser.add_argument("--calls", type=int, default=10_000, help="pings timed per route and path")
    args = parser.parse_args()
    if args.store is not None:
        result = measure(args.store, args.calls)
    else:
        with tempfile.TemporaryDirectory(prefix="mqstore-round-trip-") as work:
            broker = BrokerProcess(Path(work) / "store", "--remoting", "off", "--metrics", "off").start()
            try:
                result = measure(broker.store, args.calls)
            finally:
                broker.stop()
    print(json.dumps({"calls": args.calls, **result}, indent=2))


if __name__ == "__main__":
    main()
