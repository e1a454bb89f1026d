"""Delay levels under load: how late 10,000 pending delayed messages come out, and how fast a backlog drains.

    python -m mqstore.scripts.bench.delay [--count 10000] [--levels "1s 5s 10s"] [--level 2] [--rate 10000] [--out FILE]

One broker (``mqstore start``, ASYNC_FLUSH, default geometry) with ``[store] message_delay_level``
set to ``--levels``. Two runs, each of ``count`` messages of 128 bytes sent in batches of 100:

- accuracy: sent at level ``--level`` (5 s by default) at ``--rate`` msgs/s, within the level's delay,
  so all of them are pending at once and come due at that rate; each copy's lateness is its store
  time on the real topic minus its delivery time (the tags code of its SCHEDULE_TOPIC_XXXX entry):
  p50, p99 and max in ms;
- throughput: the scheduler stopped (SIGSTOP) while ``count`` messages at level 1 are sent and come
  due, then let go (SIGCONT): the backlog's copies per second, first copy to last (store times),
  and the scheduler's CPU time per message.

Prints one JSON object (and writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from mqstore.engine.consumequeue.consume_queue import ConsumeQueue
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.delay.table import parse_delay_levels, schedule_queue_id
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import SCHEDULE_TOPIC
from mqstore.ipc.client.api import Admin, Outgoing, Producer
from mqstore.scripts import harness
from mqstore.scripts.bench.suite import git_commit

BODY = b"d" * 128


def send(store: Path, topic: str, count: int, level: int, rate: int = 0) -> None:
    """``count`` messages at ``level`` in batches of 100, at ``rate`` msgs/s (0: as fast as they go)."""
    began = time.monotonic()
    with Producer(store) as producer:
        for start in range(0, count, 100):
            if rate:
                time.sleep(max(0.0, began + start / rate - time.monotonic()))
            batch = [Outgoing(topic, BODY, properties={"DELAY": str(level)}) for _ in range(min(100, count - start))]
            assert all(r.ok for r in producer.send_batch(batch))


def stored(store: Path, topic: str) -> int:
    with Admin(store) as admin:
        return sum(hi - lo for lo, hi in admin.queue_info(topic).values())


def copies(store: Path, topic: str, level: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Each copy's store time and its schedule entry's delivery time, read off the files."""
    due = ConsumeQueue.open(store / "consumequeue", SCHEDULE_TOPIC, schedule_queue_id(level), writable=False)
    queues = ConsumeQueueStore.open(store / "consumequeue", writable=False)
    commitlog = CommitLog.open(store / "commitlog", writable=False)
    try:
        schedule = due.read(0, due.scan_valid_end())["tags_code"]
        store_ms, deliver_ms = [], []
        for cq in queues:
            if cq.topic != topic:
                continue
            for row in cq.read(0, cq.scan_valid_end()):
                record = commitlog.read_record(int(row["phys_offset"]), read_body=False).record
                assert record is not None
                at_level, _, queue_offset = record.properties["DELAY_OFFSET"].partition(":")
                assert int(at_level) == level
                store_ms.append(record.store_ms)
                deliver_ms.append(int(schedule[int(queue_offset)]))
        return np.asarray(store_ms), np.asarray(deliver_ms)
    finally:
        due.close()
        queues.close()
        commitlog.close()


def run(count: int, levels: str, level: int, rate: int) -> dict[str, Any]:
    table = parse_delay_levels(levels)
    with tempfile.TemporaryDirectory(prefix="mqbench-") as tmp:
        root = Path(tmp)
        config = root / "broker.toml"
        config.write_text(f'[store]\nmessage_delay_level = "{levels}"\n')
        broker = harness.BrokerProcess(root / "store", "--remoting", "off", config=config).start()
        try:
            store = broker.store
            sent_at = time.monotonic()
            send(store, "Accuracy", count, level, rate)
            send_s = time.monotonic() - sent_at
            harness.wait_for(lambda: stored(store, "Accuracy") >= count, 120 + table.delay_ms(level) / 1000,
                             "every delayed copy")
            scheduler = psutil.Process(broker.pid_of("scheduler"))
            scheduler.send_signal(signal.SIGSTOP)
            try:
                send(store, "Backlog", count, 1)
                time.sleep(table.delay_ms(1) / 1000 + 0.5)  # every one due before the scheduler runs again
                cpu_before = sum(scheduler.cpu_times()[:2])
            finally:
                scheduler.send_signal(signal.SIGCONT)
            harness.wait_for(lambda: stored(store, "Backlog") >= count, 120, "the backlog's copies")
            cpu_s = sum(scheduler.cpu_times()[:2]) - cpu_before
            assert stored(store, "Accuracy") == count and stored(store, "Backlog") == count
        finally:
            broker.stop()
        accuracy_store, accuracy_due = copies(root / "store", "Accuracy", level)
        backlog_store, _ = copies(root / "store", "Backlog", 1)
    lateness = accuracy_store - accuracy_due
    drain_s = max(1, int(backlog_store.max() - backlog_store.min())) / 1000
    return {
        "commit": git_commit(), "cpus": os.cpu_count(), "count": count, "levels": levels, "level": level,
        "accuracy": {"pending_at_once": bool(send_s * 1000 < table.delay_ms(level)), "send_s": round(send_s, 3),
                     "due_msgs_per_s": round(count / send_s),
                     "early": int((lateness < 0).sum()),
                     "lateness_ms": {"p50": float(np.percentile(lateness, 50)),
                                     "p99": float(np.percentile(lateness, 99)), "max": int(lateness.max())}},
        "throughput": {"backlog": count, "drain_s": drain_s, "msgs_per_s": round(count / drain_s),
                       "scheduler_cpu_us_per_msg": round(cpu_s / count * 1e6, 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="delayed messages in each run")
    parser.add_argument("--levels", default="1s 5s 10s", help="the broker's message_delay_level")
    parser.add_argument("--level", type=int, default=2, help="the accuracy run's delay level")
    parser.add_argument("--rate", type=int, default=10_000,
                        help="the accuracy run's send rate (msgs/s; 0: as fast as they go): the rate they come due")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    result = json.dumps(run(args.count, args.levels, args.level, args.rate), indent=2)
    print(result)
    if args.out:
        args.out.write_text(result + "\n")


if __name__ == "__main__":
    main()
