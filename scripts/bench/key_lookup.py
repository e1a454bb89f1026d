"""Key lookups against a running broker, from this one process: one key a request (``Admin.query_by_key``)
one at a time and ``--in-flight`` outstanding (``query_by_key_async``), then ``--keys-per-request`` keys a
request (``Admin.query_keys``, the suite's batched lookups); per lookup, the wall time, the
client's CPU (every thread of this process) and the readers' CPU (psutil on every ``reader-*``).
With ``--profile FILE``, the one-at-a-time lookups also run under cProfile, its stats written there.
One JSON document on stdout.

    python -m mqstore.scripts.bench.key_lookup --store STORE [--lookups 10000] [--keyed 7500] [--topic Bench0]
                                       [--in-flight 32] [--keys-per-request 100]

The keys are ``k0-<n>`` for random n below ``--keyed``: what ``mqstore bench load`` keys worker 0's
messages with (10 % of them by default), so a store filled by it answers every lookup.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import random
import resource
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from mqstore.ipc.client.api import Admin, MessageBatch
from mqstore.scripts.bench.cpu import actor_cpu_s

WARM_LOOKUPS = 500


def _client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _readers_cpu_s(store: Path) -> float:
    return sum(s for name, s in actor_cpu_s(store).items() if name.startswith("reader"))


def timed(store: Path, run: Callable[[list[str]], int], keys: list[str]) -> dict[str, Any]:
    """Wall, client CPU and readers' CPU per lookup of ``run(keys)``, and how many it found."""
    readers, client, wall = _readers_cpu_s(store), _client_cpu_s(), time.perf_counter()
    found = run(keys)
    wall_s, client_s, readers_s = time.perf_counter() - wall, _client_cpu_s() - client, _readers_cpu_s(store) - readers
    return {"lookups_per_s": round(len(keys) / wall_s), "found": found,
            "wall_us": round(wall_s * 1e6 / len(keys), 1), "client_cpu_us": round(client_s * 1e6 / len(keys), 1),
            "readers_cpu_us": round(readers_s * 1e6 / len(keys), 1)}


def measure(store: Path, lookups: int, keyed: int, topic: str, in_flight: int, profile: Path | None,
            keys_per_request: int = 100) -> dict[str, Any]:
    rng = random.Random(0)
    keys = [f"k0-{rng.randrange(keyed)}" for _ in range(lookups)]
    with Admin(store, timeout_ms=30_000) as admin:
        def one_at_a_time(keys: list[str]) -> int:
            return sum(bool(admin.query_by_key(topic, key, max_count=1)) for key in keys)

        def windowed(keys: list[str]) -> int:
            found, window = 0, list[Future[MessageBatch]]()
            for key in keys:
                if len(window) == in_flight:
                    found += bool(window.pop(0).result())
                window.append(admin.query_by_key_async(topic, key, max_count=1))
            return found + sum(bool(f.result()) for f in window)

        def batched(keys: list[str]) -> int:
            return sum(bool(found) for i in range(0, len(keys), keys_per_request)
                       for found in admin.query_keys(topic, keys[i:i + keys_per_request], max_count=1))

        one_at_a_time(keys[:WARM_LOOKUPS])
        out = {"lookups": lookups, "one_at_a_time": timed(store, one_at_a_time, keys),
               f"{in_flight}_in_flight": timed(store, windowed, keys),
               f"{keys_per_request}_keys_a_request": timed(store, batched, keys)}
        if profile is not None:
            profiler = cProfile.Profile()
            profiler.runcall(one_at_a_time, keys)
            profiler.dump_stats(profile)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="a running broker's store")
    parser.add_argument("--lookups", type=int, default=10_000, help="lookups timed each way")
    parser.add_argument("--keyed", type=int, default=7_500, help="keys k0-0 .. k0-(keyed-1) are looked up")
    parser.add_argument("--topic", default="Bench0")
    parser.add_argument("--in-flight", type=int, default=32, help="lookups outstanding in the second run")
    parser.add_argument("--keys-per-request", type=int, default=100, help="keys a request in the batched run")
    parser.add_argument("--profile", type=Path, default=None, help="cProfile stats of a profiled one-at-a-time run")
    args = parser.parse_args()
    print(json.dumps(measure(args.store, args.lookups, args.keyed, args.topic, args.in_flight, args.profile,
                             args.keys_per_request), indent=2))


if __name__ == "__main__":
    main()
