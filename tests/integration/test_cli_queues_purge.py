"""``mqstore queues purge`` through the command against a real broker with two readers: committed
offsets, ack-mode groups and a consumer running at the time, each after the purge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.engine.meta.purges import PURGED_QUEUES_FILE, PurgedQueues
from mqstore.ipc.client.api import AckConsumer, Admin, Consumer, Producer
from tests.integration.broker import Broker, wait_for

pytestmark = pytest.mark.slow
OLD, NEW = 10, 5


def _send(broker: Broker, topic: str, count: int, tag: str) -> None:
    with Producer(broker.store) as producer:
        assert all(r.ok for r in producer.send_batch([{"topic": topic, "body": f"{tag}-{i}".encode(), "queue_id": 0}
                                                      for i in range(count)]))


def _built(broker: Broker, topic: str, ends: dict[int, int]) -> None:
    with Admin(broker.store) as admin:
        wait_for(lambda: all(admin.queue_info(topic).get(q, (0, 0))[1] == end for q, end in ends.items()) or None,
                 30, f"{topic}'s consume queues built")


def _purge(broker: Broker, *argv: str) -> list[dict[str, object]]:
    done = broker.mqstore("queues", "purge", *argv, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_purge_moves_every_group_to_the_end_and_a_running_consumer_gets_at_most_its_prefetch(tmp_path: Path) -> None:
    with Broker(tmp_path, readers=2) as broker:
        with Admin(broker.store) as admin:
            admin.create_topic("P", 1)
        _send(broker, "P", OLD, "old")
        _built(broker, "P", {0: OLD})
        with Admin(broker.store) as admin:
            admin.commit_offset("Slow", "P", 0, 3)  # a plain group that consumed 3
        running = Consumer(broker.store, group="Running", topic="P", start="earliest", reader_count=2,
                           max_per_pull=1, prefetch_messages=2, long_poll_ms=200)
        acking = AckConsumer(broker.store, group="Acking", topic="P", prefetch=2, reader_count=2)
        try:
            first = running.poll(timeout_ms=10_000, max_count=1)
            assert [m.body for m in first] == [b"old-0"]
            held = wait_for(lambda: acking.receive(2, timeout_ms=1000) or None, 30, "two ack-mode deliveries")
            held += acking.receive(2 - len(held), timeout_ms=1000) if len(held) < 2 else []
            assert len(held) == 2

            rows = _purge(broker, "P")
            floors = [r for r in rows if r["type"] == "queue"]
            assert floors == [{"type": "queue", "topic": "P", "queue_id": 0, "floor": OLD}]
            by_group = {r["group"]: r for r in rows if r["type"] == "purged"}
            assert by_group["Slow"]["mode"] == "offset" and by_group["Slow"]["purged"] == OLD - 3
            assert by_group["Acking"]["mode"] == "ack" and by_group["Acking"]["purged"] == OLD - 2
            assert by_group["Acking"]["unacked_kept"] == 2
            # durable before the reply: the files say so already
            assert ConsumerOffsets.load(broker.store / CONSUMER_OFFSET_FILE, lambda: 0).query("Slow", "P", 0) == OLD
            assert PurgedQueues.load(broker.store / PURGED_QUEUES_FILE).floor("P", 0) == OLD

            _send(broker, "P", NEW, "new")
            got: list[bytes] = []
            wait_for(lambda: got.extend(m.body for m in running.poll(timeout_ms=200)) or
                     sum(b.startswith(b"new") for b in got) == NEW or None, 30, "the new messages")
            old_after = [b for b in got if b.startswith(b"old")]
            # at most what it had pulled before the purge: two buffered and one pull's worth in flight
            assert len(old_after) <= 3, old_after
            assert [b for b in got if b.startswith(b"new")] == [f"new-{i}".encode() for i in range(NEW)]
            running.commit()
            with Admin(broker.store) as admin:
                assert admin.fetch_offset("Running", "P", 0) == OLD + NEW

            # ack mode: the two delivered before the purge are still the consumer's to settle
            assert [str(s) for s in acking.ack(held[:1])] == ["OK"]
            assert [str(s) for s in acking.nack(held[1:], requeue=True)] == ["OK"]
            after: list[bytes] = []

            def settle() -> bool:
                got = acking.receive(8, timeout_ms=200)
                after.extend(d.body for d in got)
                acking.ack(got)  # room under the prefetch for the rest
                return len(after) >= NEW + 1
            wait_for(settle, 30, "the requeued and the new messages")
            assert sorted(after) == sorted([held[1].body] + [f"new-{i}".encode() for i in range(NEW)])
        finally:
            running.close()
            acking.close()
        # an ack-mode group's purge survives a restart of its reader: nothing old comes back
        assert broker.stop() == 0
        broker.start()
        with AckConsumer(broker.store, group="Acking", topic="P", reader_count=2) as again:
            assert again.receive(8, timeout_ms=1500) == []


def test_purge_of_one_queue_and_bad_input(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker:
        with Admin(broker.store) as admin:
            admin.create_topic("Two", 2)
        with Producer(broker.store) as producer:
            assert all(r.ok for r in producer.send_batch([{"topic": "Two", "body": b"x", "queue_id": q}
                                                          for q in (0, 0, 1)]))
        _built(broker, "Two", {0: 2, 1: 1})
        with Admin(broker.store) as admin:
            admin.commit_offset("G", "Two", 0, 0)
            admin.commit_offset("G", "Two", 1, 0)
        rows = _purge(broker, "Two", "--queue", "1")
        assert [r for r in rows if r["type"] == "purged"] == [
            {"type": "purged", "topic": "Two", "group": "G", "queue_id": 1, "mode": "offset", "purged": 1,
             "unacked_kept": None, "queue_offset": 1}]
        with Admin(broker.store) as admin:
            assert (admin.fetch_offset("G", "Two", 0), admin.fetch_offset("G", "Two", 1)) == (0, 1)
        table = broker.mqstore("queues", "purge", "Two")
        assert table.returncode == 0 and "purged Two" in table.stdout and "G" in table.stdout, table.stdout
        for argv, said in ((("NoSuch",), "no topic 'NoSuch'"), (("Two", "--queue", "7"), "has no queue 7")):
            bad = broker.mqstore("queues", "purge", *argv)
            assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
