"""Chaos harness: a broker under steady load while actors, or the whole tree, are killed, frozen
and restarted, then every promise checked on the files.

    python -m mqstore.scripts.survival.chaos [--kills 100] [--interval-ms 400] [--flush SYNC_FLUSH|ASYNC_FLUSH]
                            [--producers 3] [--max-seconds 900] [--seed 1]

Load: producer processes (``mqstore.scripts.survival.send_log.produce``) send batches to one topic and log every
outcome; one offset-mode consumer group and one ack-mode group consume it. Every ``interval_ms`` a
random event: SIGKILL to a random actor (most often), SIGKILL to the whole tree (the supervisor;
its actors follow it) and a fresh start, SIGSTOP then SIGCONT to a random actor, or a supervisor
restart (a clean stop and start). Kills count SIGKILLs of an actor or of the tree. At the end the
load stops, the consumers drain, the broker stops cleanly and the store is checked offline.

The invariants (each a count in the verdict; ``ok`` when all are 0 and the target kill count was
reached):

- ``lost`` / ``garbled``: every send answered SEND_OK is readable at the queue offset it was told,
  with its body (``mqstore.scripts.survival.ack_check.check_acked``); ``offset_reused``: no queue offset was
  acknowledged for two messages.
- ``duplicated``: no body is stored twice (producers never resend, so a second copy is the store's).
- ``consumed_unacknowledged``: what a consumer received (offset or ack mode) was acknowledged to its
  producer, or its send is in doubt: the answer was lost in a kill (timeout, broker gone) or was
  FLUSH_DISK_TIMEOUT. A message received whose send was refused outright, or never sent, counts.
- ``consumed_not_stored``: everything a consumer received is in the store at the end, at the queue
  offset it was received at, with that body. In SYNC_FLUSH a message becomes consumable only once
  flushed, so this is the "nothing seen that was not durable" promise; with process kills only (the
  page cache survives), it holds in ASYNC_FLUSH too.
- ``ack_group_missed``: the ack-mode group received every message stored in the topic (redeliveries
  after a kill are allowed; a message the queue index skipped is not). Received, as its log says
  before each ack: an ack whose answer a kill swallowed may have been applied all the same.
- ``offset_group_missed``: the offset-mode group received every stored message (at least once).
- ``verify_findings``: ``verify_store`` on the stopped store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import multiprocess

from mqstore.engine import MessageStore
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.api import Admin
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError
from mqstore.scripts.harness import Broker, wait_for
from mqstore.scripts.survival.ack_check import check_acked
from mqstore.scripts.survival.send_log import Logs, consume, digest, produce

TOPIC = "Chaos"
EVENTS = (("kill_actor", 0.70), ("stop_cont", 0.15), ("kill_tree", 0.08), ("restart", 0.07))


def stored(store_dir: Path) -> dict[str, list[tuple[int, int]]]:
    """Body hash -> every (queue, queue offset) holding it, for the chaos topic."""
    out: dict[str, list[tuple[int, int]]] = {}
    with MessageStore.open(store_dir) as store:
        for queue in store.topics().get(TOPIC, []):
            offset = store.min_queue_offset(TOPIC, queue)
            while True:
                got = store.get(TOPIC, queue, offset, max_count=256, max_bytes=8 << 20).messages
                if not got:
                    break
                for m in got:
                    out.setdefault(digest(m.body), []).append((queue, m.queue_offset))
                offset = got[-1].queue_offset + 1
    return out


def _quietly(predicate: Any) -> bool:
    try:
        return bool(predicate())
    except (BrokerError, BrokerTimeoutError):
        return False


class Chaos:
    def __init__(self, broker: Broker, rng: random.Random) -> None:
        self.broker = broker
        self.rng = rng
        self.counts = {"kill_actor": 0, "kill_tree": 0, "stop_cont": 0, "restart": 0}

    @property
    def kills(self) -> int:
        return self.counts["kill_actor"] + self.counts["kill_tree"]

    def event(self) -> None:
        roll, kind = self.rng.random(), EVENTS[-1][0]
        for name, weight in EVENTS:
            if roll < weight:
                kind = name
                break
            roll -= weight
        status = self.broker.status()
        if status is None:
            return
        pids = {name: info["pid"] for name, info in status["actors"].items() if info["pid"]}
        if kind in ("kill_actor", "stop_cont") and pids:
            pid = pids[self.rng.choice(sorted(pids))]
            with contextlib.suppress(ProcessLookupError):
                if kind == "kill_actor":
                    os.kill(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(self.rng.uniform(0.05, 0.8))
                    os.kill(pid, signal.SIGCONT)
        elif kind == "kill_tree" and self.broker.proc is not None:
            self.broker.kill_tree()
            self.broker.start()
        elif kind == "restart":
            code = self.broker.stop()
            if code != 0:
                raise AssertionError(f"a supervisor restart: the broker stopped with {code}:\n{self.broker.logs()}")
            self.broker.start()
        self.counts[kind] += 1


def run(root: Path, kills: int, interval_ms: int, mode: str, producers: int, max_seconds: float,
        seed: int) -> dict[str, Any]:
    started = time.monotonic()
    rng = random.Random(seed)
    broker = Broker(root, mode=mode, readers=2, flap_restarts=1_000_000)
    mp = multiprocess.get_context("spawn")
    workers: list[Any] = []
    logs = [root / f"producer-{i}.log" for i in range(producers)]
    consumer_logs = [root / "offset-consumer.log", root / "ack-consumer.log"]
    chaos = Chaos(broker, rng)
    try:
        broker.start()
        store = str(broker.store)
        for i in range(producers):
            workers.append(mp.Process(target=produce, args=(store, str(logs[i]), f"p{i}", TOPIC, 8, 200, 20)))
        for w in workers:
            w.start()
        wait_for(lambda: len(Logs.read(logs).acked) > 50, 60, "the first sends")  # the topic exists
        consumers = [mp.Process(target=consume, args=(store, str(consumer_logs[0]), "offsets", TOPIC, False)),
                     mp.Process(target=consume, args=(store, str(consumer_logs[1]), "acks", TOPIC, True))]
        for c in consumers:
            c.start()
        while chaos.kills < kills and time.monotonic() - started < max_seconds:
            time.sleep(interval_ms / 1000)
            chaos.event()
        for w in workers:
            w.terminate()
        for w in workers:
            w.join(30)
        broker.wait_ready()

        def drained() -> bool:
            with Admin(store, timeout_ms=2000) as admin:
                spans = admin.queue_info(TOPIC)
            got = Logs.read(consumer_logs)
            want = {(q, o) for q, (low, high) in spans.items() for o in range(low, high)}
            return want <= {(q, o) for _, q, o, _ in got.ack_received} and \
                want <= {(q, o) for _, q, o, _ in got.seen}
        with contextlib.suppress(AssertionError):
            wait_for(lambda: _quietly(drained), 90, "the consumers to drain", interval_s=0.5)
        time.sleep(1.0)
        for c in consumers:
            c.terminate()
        for c in consumers:
            c.join(30)
        exit_code = broker.stop()
        return verdict(broker, chaos, Logs.read(logs + consumer_logs), exit_code, mode, started)
    except AssertionError as exc:
        return {"harness": "chaos", "ok": False, "error": str(exc)[-3000:], "events": chaos.counts,
                "kills": chaos.kills}
    finally:
        for w in workers:
            if w.is_alive():
                w.kill()
        broker.__exit__()


def verdict(broker: Broker, chaos: Chaos, logs: Logs, exit_code: int, mode: str, started: float) -> dict[str, Any]:
    check = check_acked(broker.store, logs.acked)
    in_store = stored(broker.store)
    acked_hashes = {h for *_, h in logs.acked}
    duplicated = [h for h, where in in_store.items() if len(where) > 1]
    consumed = logs.seen + logs.ack_received
    unacknowledged = [(q, o) for _, q, o, h in consumed if h not in acked_hashes and h not in logs.doubt]
    not_stored = [(q, o) for _, q, o, h in consumed if (q, o) not in in_store.get(h, [])]
    positions = {(q, o) for where in in_store.values() for q, o in where}
    ack_missed = positions - {(q, o) for _, q, o, _ in logs.ack_received}
    offset_missed = positions - {(q, o) for _, q, o, _ in logs.seen}
    report = verify_store(broker.store)
    counts = {"lost": check.counts["lost"], "garbled": check.counts["garbled"],
              "offset_reused": check.counts["offset_reused"], "expired": check.counts["expired"],
              "duplicated": len(duplicated), "consumed_unacknowledged": len(unacknowledged),
              "consumed_not_stored": len(not_stored), "ack_group_missed": len(ack_missed),
              "offset_group_missed": len(offset_missed), "verify_findings": len(report.findings)}
    return {"harness": "chaos", "flush_mode": mode, "kills": chaos.kills, "events": chaos.counts,
            **logs.summary(), "stored": len(positions), **counts, "broker_exit": exit_code,
            "examples": {"lost": check.lost, "consumed_unacknowledged": unacknowledged[:5],
                         "consumed_not_stored": not_stored[:5], "ack_group_missed": sorted(ack_missed)[:5],
                         "offset_group_missed": sorted(offset_missed)[:5],
                         "findings": [f"{f.kind} {f.location}: {f.detail}" for f in report.findings[:3]]},
            "seconds": round(time.monotonic() - started, 1),
            "ok": exit_code == 0 and check.acked > 0 and not any(counts.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--interval-ms", type=int, default=400)
    parser.add_argument("--flush", choices=("SYNC_FLUSH", "ASYNC_FLUSH"), default="SYNC_FLUSH")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=900)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        result = run(Path(tmp), args.kills, args.interval_ms, args.flush, args.producers, args.max_seconds,
                     args.seed)
    result["target_kills"] = args.kills
    result["ok"] = bool(result["ok"]) and result["kills"] >= args.kills
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
