"""What an operator asks of topics and groups, through the ``mqstore`` command against a real broker
and on its stopped store: ``topics describe`` (sizes checked against the records themselves),
``topics list`` hiding the system topics, ``groups reset`` planning before it executes (``--to-offset``,
``--shift-by``), ack-mode groups listed and described with their counts, and ``groups delete``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine.ackindex.low_water import queue_index_keys
from mqstore.engine.meta.deleted_groups import DELETED_GROUPS_FILE, DeletedGroups
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.scripts.cli.mqstore import mqstore_version
from tests.integration.broker import Broker

pytestmark = pytest.mark.slow


def _json(broker: Broker, *argv: str, code: int = 0) -> list[dict[str, Any]]:
    done = broker.mqstore(*argv, "--json")
    assert done.returncode == code, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _consume_all(store: Path, group: str, topic: str, expected: int) -> None:
    got: list[Any] = []
    with Consumer(store, group=group, topic=topic, start="earliest", long_poll_ms=100) as consumer:
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(500)
        consumer.commit()
    assert len(got) == expected


def _offsets_on_disk(store: Path) -> ConsumerOffsets:
    return ConsumerOffsets.load(store / CONSUMER_OFFSET_FILE, lambda: 0)


def test_topics_describe_and_list_say_what_a_topic_holds_and_who_reads_it(tmp_path: Path) -> None:
    before_ms = int(time.time() * 1000)
    with Broker(tmp_path) as broker:
        status = broker.mqstore("status", "--json")
        reply = json.loads(status.stdout)
        assert reply["version"] == mqstore_version()
        assert before_ms - 1000 <= reply["started_ms"] <= int(time.time() * 1000)  # the supervisor's start
        assert 0 <= reply["uptime_s"] <= (int(time.time() * 1000) - before_ms) // 1000 + 1
        shown_status = broker.mqstore("status").stdout.splitlines()
        assert shown_status[-1].startswith(f"mqstore {mqstore_version()}; up ") and "since" in shown_status[-1]
        assert broker.mqstore("topics", "create", "Orders", "--queues", "2").returncode == 0
        with Producer(broker.store) as producer:
            sent = producer.send_batch([{"topic": "Orders", "body": b"x" * (10 * i)} for i in range(8)])
        _consume_all(broker.store, "G", "Orders", 8)
        with Producer(broker.store) as producer:
            sent += producer.send_batch([{"topic": "Orders", "body": b"late"}] * 2)
        assert all(r.ok for r in sent)
        with Admin(broker.store) as admin:  # each record's size as the commitlog holds it
            stored = [admin.view_by_id(r.msg_id) for r in sent]
        sizes = {q: sum(m.size for m in stored if m is not None and m.queue_id == q) for q in (0, 1)}
        with AckConsumer(broker.store, group="A", topic="Orders") as acker:
            deadline = time.monotonic() + 30
            taken: list[Any] = []
            while len(taken) < 3 and time.monotonic() < deadline:
                taken += acker.receive(3 - len(taken), 500)
            acker.ack(taken[:1])

        (topic,) = _json(broker, "topics", "describe", "Orders")
        assert topic["config"] == {"queue_count": 2, "perm": 6, "system": False}
        assert [(q["min_queue_offset"], q["max_queue_offset"], q["messages"]) for q in topic["queues"]] == [
            (0, 5, 5), (0, 5, 5)]
        assert {q["queue_id"]: q["bytes"] for q in topic["queues"]} == sizes
        assert topic["bytes"] == sum(sizes.values()) > 0
        groups = {g["group"]: g for g in topic["groups"]}
        assert groups["G"]["mode"] == "offsets" and groups["G"]["lag"] == 2
        assert groups["A"]["mode"] == "ack" and (groups["A"]["ready"], groups["A"]["unacked"]) == (9, 0)

        shown = broker.mqstore("topics", "list")
        assert "Orders" in shown.stdout and "SCHEDULE_TOPIC_XXXX" not in shown.stdout
        assert "2 system topics hidden; --all shows them" in shown.stdout
        every = {t["topic"]: t["system"] for t in _json(broker, "topics", "list", "--all")}
        assert every == {"Orders": False, "SCHEDULE_TOPIC_XXXX": True, "rmq_sys_wheel_timer": True}
        assert broker.mqstore("topics", "describe", "Nowhere").returncode == 2
        assert broker.stop() == 0

    (offline,) = _json(broker, "topics", "describe", "Orders")
    assert [offline[k] for k in ("queues", "config", "bytes")] == [topic[k] for k in ("queues", "config", "bytes")]
    assert [(g["group"], g["mode"], g.get("lag")) for g in offline["groups"]] == [
        ("G", "offsets", 2), ("A", "ack", None)]
    assert "2 system topics hidden" in broker.mqstore("topics", "list").stdout



def test_groups_reset_plans_then_executes_and_delete_removes_a_group_durably(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker:
        assert broker.mqstore("topics", "create", "Orders", "--queues", "2").returncode == 0
        with Producer(broker.store) as producer:
            assert all(r.ok for r in producer.send_batch([{"topic": "Orders", "body": b"m"}] * 8))
        _consume_all(broker.store, "G", "Orders", 8)
        with AckConsumer(broker.store, group="A", topic="Orders") as acker:
            deadline = time.monotonic() + 30
            taken: list[Any] = []
            while len(taken) < 3 and time.monotonic() < deadline:
                taken += acker.receive(3 - len(taken), 500)
            acker.ack(taken[:1])
            # one acked of eight: the other seven ready or in its consumer's hands (two taken, more prefetched)
            described = _json(broker, "groups", "describe", "A")
            assert [r["type"] for r in described] == ["ack_queue", "ack_queue"], described
            ready, unacked = (sum(r[k] for r in described) for k in ("ready", "unacked"))
            assert ready + unacked == 7 and unacked >= 2, described
            refused = broker.mqstore("groups", "delete", "A")
            assert refused.returncode == 1 and "live consumers" in refused.stderr, refused.stderr
        listed = {g["group"]: g for g in _json(broker, "groups", "list")}
        assert listed["A"]["modes"] == ["ack"] and listed["A"]["ack"]["ready"] == 7  # the two released came back
        assert listed["G"]["modes"] == ["offsets"] and "ack" not in listed["G"]

        plan = _json(broker, "groups", "reset", "G", "--topic", "Orders", "--shift-by", "-3", "--force")
        assert [(r["current_offset"], r["target_offset"], r["executed"]) for r in plan] == [(4, 1, False)] * 2
        assert [q["committed_offset"] for q in _json(broker, "groups", "describe", "G")] == [4, 4]  # a plan only
        done = _json(broker, "groups", "reset", "G", "--topic", "Orders", "--shift-by", "-9", "--force", "--execute")
        assert [(r["target_offset"], r["executed"]) for r in done] == [(0, True)] * 2  # clamped to the min
        done = _json(broker, "groups", "reset", "G", "--topic", "Orders", "--to-offset", "99", "--force", "--execute")
        assert [r["target_offset"] for r in done] == [4, 4]  # clamped to the max
        assert [q["committed_offset"] for q in _json(broker, "groups", "describe", "G")] == [4, 4]

        gone = _json(broker, "groups", "delete", "A", "--live-ms", "1")
        assert gone == [{"type": "deleted_group", "group": "A", "offsets": [],
                         "ack_queues": [{"topic": "Orders", "queue_id": 0}, {"topic": "Orders", "queue_id": 1}]}]
        assert queue_index_keys(broker.store) == [] and not (broker.store / "queueindex" / "A").exists()
        assert broker.mqstore("groups", "describe", "A").returncode == 2
        with AckConsumer(broker.store, group="A", topic="Orders") as acker:  # a new group: every message again
            again: list[Any] = []
            deadline = time.monotonic() + 30
            while len(again) < 8 and time.monotonic() < deadline:
                again += acker.receive(8, 500)
            assert len(again) == 8 and not any(d.redelivered for d in again)
        assert broker.stop() == 0

    assert broker.mqstore("groups", "delete", "G", "--live-ms", "1").returncode == 0  # offline: the files
    assert _offsets_on_disk(broker.store).topics_of("G") == []
    # numbered, as a running broker numbers a deletion, for the slaves (mqstore.engine.meta.deleted_groups)
    assert DeletedGroups.load(broker.store / DELETED_GROUPS_FILE).deleted == {"G": 1}
    assert broker.mqstore("groups", "describe", "G").returncode == 2
    assert broker.mqstore("groups", "delete", "G").returncode == 2  # no such group now
    with broker:
        assert "G" not in {g["group"] for g in _json(broker, "groups", "list")}
        assert broker.stop() == 0
