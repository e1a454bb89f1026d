"""What CURVE roles cost the send path: one broker on ZeroMQ over TCP with CURVE (ASYNC_FLUSH),
the same load with no roles file and with one in force, alternating, rounds interleaved so the two
see the same machine.

    python -m mqstore.scripts.bench.curve_roles [--rounds 5] [--count 20000] [--inflight 32]

With a roles file the writer reads each request's first frame without a copy, to learn the key
that sent it (the ZAP handler's User-Id), and looks its roles up (``mqstore.ipc.transport.roles``).
Two loads, ``--inflight`` requests outstanding: ``single`` one 128-byte message a request (where a
per-request cost shows most), ``batch_100`` a hundred a request (the suite's ASYNC row). Prints
one JSON object: each load's msgs/s per round and their medians, with roles off and on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from mqstore.ipc.client.api import Admin, BrokerError, Producer
from mqstore.scripts.harness import Broker, free_port_range, wait_for

BODY = b"x" * 128
ROLES = 'client = ["produce"]\n'  # the benchmark's key: it may send, and not delete


def _rate(count: int, per_request: int, inflight: int, send: Callable[[], Future[Any]]) -> float:
    window: deque[Future[Any]] = deque()
    started = time.perf_counter()
    for _ in range(count // per_request):
        if len(window) >= inflight:
            window.popleft().result()
        window.append(send())
    while window:
        window.popleft().result()
    return round(count / (time.perf_counter() - started))


def _roles_in_force(admin: Admin) -> bool:
    try:
        admin.delete_topic("NoSuchTopic")
    except BrokerError:
        return True
    return False


def measure(root: Path, rounds: int, count: int, inflight: int) -> dict[str, Any]:
    broker = Broker(root, tcp_port=free_port_range(12), commitlog=64 * 1024 * 1024, cq=300_000)
    roles_file = broker.keys_dir / "roles.toml"
    rates: dict[str, dict[str, list[float]]] = {mode: {"single": [], "batch_100": []} for mode in ("off", "on")}
    batch = [{"topic": "Bench", "body": BODY} for _ in range(100)]
    with broker, Producer(endpoints=broker.endpoints(), timeout_ms=30_000) as producer, \
            Admin(endpoints=broker.endpoints()) as admin:
        producer.send("Bench", BODY)  # the topic made, the connection up
        for _ in range(rounds):
            for mode in ("off", "on"):
                if mode == "on":
                    roles_file.write_text(ROLES)
                else:
                    roles_file.unlink(missing_ok=True)
                wait_for(lambda m=mode: _roles_in_force(admin) == (m == "on"), 30, f"roles {mode}")
                rates[mode]["single"].append(_rate(count, 1, inflight, lambda: producer.send_async("Bench", BODY)))
                rates[mode]["batch_100"].append(_rate(count * 10, 100, inflight,
                                                      lambda: producer.send_batch_async(batch)))
        broker.stop()
    return {mode: {load: {"msgs_per_s": runs, "median": statistics.median(runs)} for load, runs in loads.items()}
            for mode, loads in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--count", type=int, default=20_000, help="single sends a round (batched: ten times more)")
    parser.add_argument("--inflight", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mqstore-curve-roles-") as work:
        print(json.dumps(measure(Path(work), args.rounds, args.count, args.inflight), indent=2))


if __name__ == "__main__":
    main()
