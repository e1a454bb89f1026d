"""The scheduler killed with SIGKILL, and the whole tree killed with SIGKILL, while thousands of delayed
messages are pending or being delivered: after the restart every one is delivered exactly once, the
saved offsets of ``config/delayOffset.json`` cover every schedule entry, and ``verify`` is clean."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psutil

from mqstore.engine.consumequeue.consume_queue import ConsumeQueue
from mqstore.engine.delay.offsets import read_delay_offsets
from mqstore.engine.log.record import SCHEDULE_TOPIC
from mqstore.ipc.client.api import Admin, Consumer, Outgoing, Producer
from tests.integration.broker import Broker, wait_for

ROOT = Path(__file__).resolve().parents[2]
COUNT = 3000
LEVELS = 3
TOML = '\n[store]\nmessage_delay_level = "1s 2s 3s"\n'


def send_delayed(broker: Broker, topic: str) -> None:
    with Producer(broker.store) as producer:
        for start in range(0, COUNT, 100):
            results = producer.send_batch([Outgoing(topic, f"m-{i}".encode(), properties={"DELAY": str(i % LEVELS + 1)})
                                           for i in range(start, start + 100)])
            assert all(r.ok for r in results)


def stored(broker: Broker, topic: str) -> int:
    with Admin(broker.store) as admin:
        return sum(hi - lo for lo, hi in admin.queue_info(topic).values())


def scheduler_done(broker: Broker) -> bool:
    """Every schedule entry behind the scheduler's offsets (as it last reported them)."""
    status = broker.status()
    offsets = status["actors"]["scheduler"].get("offsets") if status else None
    return offsets is not None and sum(offsets) == COUNT


def check_exactly_once(broker: Broker, topic: str) -> None:
    wait_for(lambda: stored(broker, topic) >= COUNT, 90, f"{COUNT} delayed messages on {topic}")
    wait_for(lambda: scheduler_done(broker), 30, "the scheduler past every entry")
    assert stored(broker, topic) == COUNT  # none twice
    with Admin(broker.store) as admin:
        queues = list(range(admin.topics()[topic]))
    bodies: Counter[bytes] = Counter()
    with Consumer(broker.store, group="Check", topic=topic, queues=queues, start="earliest") as consumer:
        wait_for(lambda: bodies.update(m.body for m in consumer.poll(200)) or sum(bodies.values()) >= COUNT, 60,
                 "every copy consumed")
    assert bodies == Counter(f"m-{i}".encode() for i in range(COUNT))
    assert broker.stop() == 0
    saved = read_delay_offsets(broker.store)
    for level in range(1, LEVELS + 1):
        cq = ConsumeQueue.open(broker.store / "consumequeue", SCHEDULE_TOPIC, level - 1, 4096, writable=False)
        try:
            assert saved.offsets[level] == cq.scan_valid_end() == COUNT // LEVELS
        finally:
            cq.close()
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "verify", str(broker.store), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout.splitlines()[-1])["ok"], proc.stdout + proc.stderr


def test_scheduler_sigkilled_while_delivering_delivers_every_message_once(tmp_path: Path) -> None:
    with Broker(tmp_path, commitlog=1024 * 1024, cq=4096, extra_toml=TOML) as broker:
        send_delayed(broker, "Kill")
        for share in (1, 2, 3, 4):  # killed four times as the copies come in, each time mid-way
            wait_for(lambda s=share: stored(broker, "Kill") >= s * COUNT // 6, 60, f"{share}/6 delivered")
            old = broker.kill("scheduler")
            broker.wait_restarted("scheduler", old)
        check_exactly_once(broker, "Kill")
        assert "copies found stored past them" in broker.logs()


def test_whole_tree_sigkilled_while_delivering_delivers_every_message_once(tmp_path: Path) -> None:
    with Broker(tmp_path, commitlog=1024 * 1024, cq=4096, extra_toml=TOML) as broker:
        send_delayed(broker, "Tree")
        wait_for(lambda: stored(broker, "Tree") >= COUNT // 4, 60, "a quarter delivered")
        assert broker.proc is not None
        everyone = [*psutil.Process(broker.proc.pid).children(recursive=True), psutil.Process(broker.proc.pid)]
        for proc in everyone:  # every process at once: no actor hears of it and saves anything
            os.kill(proc.pid, signal.SIGKILL)
        psutil.wait_procs(everyone, timeout=30)
        broker.proc.wait()
        broker.proc = None
        broker.start()
        check_exactly_once(broker, "Tree")
