"""One synchronous send at a time, against the machine's own floor for a round trip between two processes.

    python -m mqstore.scripts.bench.sync_send [--calls 2000] [--rounds 5] [--trees CHECKOUT ...] [--out FILE.json]

A broker on a fresh temp store (ASYNC_FLUSH, the defaults). Each round times, one after the other and
``--calls`` times each (after a warm-up):

| case       | what one call is                                                                  |
|------------|-----------------------------------------------------------------------------------|
| zmq_echo   | a DEALER's message to a ROUTER in another process that sends it straight back: the floor |
| ping       | a ping to the writer on the caller's own socket (``Channel.request``): its loop, nothing appended |
| send       | ``Producer.send`` of a 128-byte body with tags and a key, waited for                |
| send_batch | ``Producer.send_batch`` of that one message (what ``bench remoting`` times)       |

Per case: the mean of each round in microseconds (the median round, the spread across rounds), p50
and p99 of every call, and ``x_echo``, the median round over zmq_echo's in the same round (a ratio that
holds on a busy shared machine, where the microseconds do not). For the sends, where a round trip goes
(``hops``): the writer's own time for a send (its ``send_latency``: from the round taking the request
to its answer, as the writer's stats report it) and every broker process's CPU per send.

``--trees A B``: the same rounds for each checkout in turn (round 1 of A, round 1 of B, ...), each in
a process of its own that imports that checkout's client and starts that checkout's broker: a before
and after interleaved on one machine. One JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import zmq

from mqstore.ipc.client.api import Producer
from mqstore.ipc.transport.channel import Channel
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.requests import Ping
from mqstore.scripts.harness import BrokerProcess

WARM_CALLS = 200
TIMEOUT_MS = 10_000
BODY = b"x" * 128
CASES = ("zmq_echo", "ping", "send", "send_batch")


def echo_server(endpoint: str) -> None:
    """The floor's other end: every message back as it came, until an empty one."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(endpoint)
    print("ready", flush=True)
    while True:
        frames = sock.recv_multipart()
        sock.send_multipart(frames)
        if frames[-1] == b"":
            break
    sock.close(linger=1000)
    ctx.term()


def timed(call: Callable[[], Any], calls: int) -> list[int]:
    for _ in range(WARM_CALLS):
        call()
    took = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        call()
        took.append(clock() - start)
    return took


def tree_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of a process tree, by process name."""
    out: dict[str, float] = {}
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            out[proc.name()] = out.get(proc.name(), 0.0) + times.user + times.system
        except psutil.Error:
            pass
    return out


def writer_sends(broker: BrokerProcess) -> tuple[int, float]:
    """The writer's send_latency so far: how many sends, and the seconds they took in all."""
    writer = ((broker.status() or {}).get("actors") or {}).get("writer") or {}
    latency = writer.get("send_latency")
    if latency:
        return sum(latency["buckets"]), float(latency["sum_s"])
    return 0, 0.0


def one_round(calls: int) -> dict[str, Any]:
    """Every case once, each ``calls`` times: per case its calls' times (ns), and for the sends their hops."""
    with tempfile.TemporaryDirectory(prefix="mqbench-sync-") as tmp:
        endpoint = f"ipc://{tmp}/echo"
        echo = subprocess.Popen([sys.executable, __file__, "--echo", endpoint], stdout=subprocess.PIPE, text=True)
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        broker = BrokerProcess(Path(tmp) / "store", "--remoting", "off").start()
        try:
            ctx = zmq.Context()
            dealer = ctx.socket(zmq.DEALER)
            dealer.connect(endpoint)
            payload = b"m" * (len(BODY) + 64)

            def echo_call() -> None:
                dealer.send(payload)
                dealer.recv()

            ep = Endpoints.for_store(str(broker.store), 1)
            channel = Channel({"ingress": [ep.ingress]}, curve=ep.curve)
            producer = Producer(broker.store)
            out: dict[str, Any] = {"zmq_echo": timed(echo_call, calls),
                                   "ping": timed(lambda: channel.request("ingress", Ping(), timeout_ms=TIMEOUT_MS),
                                                 calls)}
            sends: dict[str, Callable[[], Any]] = {
                "send": lambda: producer.send("SyncSend", BODY, tags="TagA", keys=["k"]),
                "send_batch": lambda: producer.send_batch([{"topic": "SyncSend", "body": BODY, "tags": "TagA",
                                                            "keys": ["k"]}])}
            assert broker.proc is not None
            for case, call in sends.items():
                call()
                time.sleep(0.3)  # a tick: the writer's stats below are reported once a tick
                cpu0, (n0, s0) = tree_cpu_s(broker.proc.pid), writer_sends(broker)
                out[case] = timed(call, calls)
                time.sleep(0.3)
                cpu1, (n1, s1) = tree_cpu_s(broker.proc.pid), writer_sends(broker)
                sent = calls + WARM_CALLS
                out[case + "_hops"] = {
                    "writer_us": round((s1 - s0) * 1e6 / max(1, n1 - n0), 1),
                    "cpu_us": {name: round((cpu1[name] - cpu0.get(name, 0.0)) * 1e6 / sent, 1)
                               for name in sorted(cpu1) if cpu1[name] - cpu0.get(name, 0.0) > 0}}
            producer.close()
            channel.close()
            dealer.send(b"")
            dealer.recv()
            dealer.close(linger=0)
            ctx.term()
        finally:
            broker.stop()
            echo.wait(10)
    return out


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    echo_means = [statistics.fmean(r["zmq_echo"]) for r in rounds]
    for case in CASES:
        means = [statistics.fmean(r[case]) for r in rounds]
        every = sorted(t for r in rounds for t in r[case])
        row: dict[str, Any] = {
            "round_us": [round(m / 1000, 1) for m in means],
            "median_us": round(statistics.median(means) / 1000, 1),
            "spread_us": [round(min(means) / 1000, 1), round(max(means) / 1000, 1)],
            "p50_us": round(every[len(every) // 2] / 1000, 1),
            "p99_us": round(every[int(len(every) * 0.99)] / 1000, 1),
            "x_echo": round(statistics.median(m / e for m, e in zip(means, echo_means, strict=True)), 2),
            "per_s": round(1e9 / statistics.median(means)),
        }
        if case + "_hops" in rounds[0]:
            row["hops"] = [r[case + "_hops"] for r in rounds]
        out[case] = row
    return out


def child_round(tree: Path, calls: int) -> dict[str, Any]:
    """One round in a process that imports ``tree``'s mqstore (and so starts its broker)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, __file__, "--round", "--calls", str(calls)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"a round on {tree} failed: {proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def commit_of(tree: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per case and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trees", type=Path, nargs="+", help="checkouts to compare, interleaved round by round")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--echo", help=argparse.SUPPRESS)
    parser.add_argument("--round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo:
        echo_server(args.echo)
        return
    if args.round:
        print(json.dumps(one_round(args.calls)))
        return
    trees = [t.resolve() for t in args.trees] if args.trees else [Path(__file__).resolve().parents[2]]
    by_tree: dict[Path, list[dict[str, Any]]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            by_tree[tree].append(child_round(tree, args.calls))
    result = {"calls": args.calls, "rounds": args.rounds, "cpus": os.cpu_count(),
              "load_avg": os.getloadavg(),
              "trees": {f"{t} ({commit_of(t)})": summary(r) for t, r in by_tree.items()}}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
