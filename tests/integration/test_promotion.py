"""Failover by command: under load the master's whole tree is SIGKILLed and its store deleted; the
slave is promoted while it runs (``mqstore promote``) and serves as the master: every send the old
master acknowledged and the slave held is there once, queue offsets go on without a gap or a reuse,
and a store promoted while stopped refuses to start again as a slave."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

from mqstore.ipc.client.api import Consumer, Producer
from tests.integration.broker import Broker, free_port_range, wait_for
from tests.integration.test_replication import caught_up, ha_stats, master_broker, slave_broker

TOPIC = "Failover"
QUEUES = 2


def read_all(store: Path, group: str, expected: int) -> list[bytes]:
    got: list[bytes] = []
    with Consumer(store, group=group, topic=TOPIC, queues=list(range(QUEUES)), start="earliest") as consumer:
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            got += [m.body for m in consumer.poll(200)]
    return got


def test_a_running_slave_promoted_after_its_master_is_lost_serves_every_acknowledged_send(tmp_path: Path) -> None:
    ha_port = free_port_range(1)
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    master = master_broker(tmp_path / "m", ha_port).start()
    slave = slave_broker(tmp_path / "s", ha_port).start()
    try:
        acked: list[tuple[bytes, int, int]] = []  # body, queue, queue offset of every SEND_OK
        with Producer(master.store) as producer:
            for i in range(400):
                result = producer.send(TOPIC, b"before-%d" % i, queue_id=i % QUEUES)
                assert result.ok
                acked.append((b"before-%d" % i, i % QUEUES, result.queue_offset))
        end = int(wait_for(lambda: int((master.status() or {}).get("written", 0)), 30, "the master's end"))
        caught_up(master, slave, end)  # an ASYNC_MASTER acknowledges before its slave holds: wait for it here
        master.kill_tree()
        shutil.rmtree(master.store)  # the machine is lost

        promoted = slave.mqstore("promote", "--role", "ASYNC_MASTER", "--wait-ms", "90000")
        assert promoted.returncode == 0, promoted.stderr + slave.logs()
        status = slave.status()
        assert status is not None and status["role"] == "ASYNC_MASTER" and status["ready"]
        assert wait_for(lambda: ha_stats(slave).get("epoch"), 30, "the master's HA actor to report") == 2

        with Producer(slave.store) as producer:  # the same sockets: clients reconnect as they would
            after = [producer.send(TOPIC, b"after-%d" % i, queue_id=i % QUEUES) for i in range(40)]
        assert all(r.ok for r in after)
        last_before = {q: max(o for _, qq, o in acked if qq == q) for q in range(QUEUES)}
        for q in range(QUEUES):  # offsets continue right after the last acknowledged one: no gap, no reuse
            assert sorted(r.queue_offset for r in after if r.queue_id == q) == list(
                range(last_before[q] + 1, last_before[q] + 1 + 20))
        got = read_all(slave.store, "NewGroup", len(acked) + len(after))
        counts = Counter(got)
        assert all(counts[body] == 1 for body, _, _ in acked)
        assert sorted(counts) == sorted([b for b, _, _ in acked] + [b"after-%d" % i for i in range(40)])
    finally:
        for broker in (slave, master):
            broker.__exit__()


def test_a_store_promoted_while_stopped_starts_as_a_master_only(tmp_path: Path) -> None:
    ha_port = free_port_range(1)
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    with master_broker(tmp_path / "m", ha_port) as master:
        slave = slave_broker(tmp_path / "s", ha_port).start()
        try:
            with Producer(master.store) as producer:
                assert all(producer.send(TOPIC, b"x%d" % i).ok for i in range(50))
            end = int(wait_for(lambda: int((master.status() or {}).get("written", 0)), 30, "the master's end"))
            caught_up(master, slave, end)
        finally:
            assert slave.stop() == 0
    promoted = slave.mqstore("promote")
    assert promoted.returncode == 0 and "epoch 2" in promoted.stderr, promoted.stderr
    refused = Broker(tmp_path / "s", commitlog=256 * 1024)
    refused.start_args += ("--role", "SLAVE", "--broker-id", "1", "--master", f"127.0.0.1:{ha_port}")
    refused.launch()
    assert refused.proc is not None and refused.proc.wait(60) != 0  # refused, with the reason on stderr
    again = Broker(tmp_path / "s", commitlog=256 * 1024)
    with again, Producer(again.store) as producer:
        assert producer.send(TOPIC, b"as master").ok
