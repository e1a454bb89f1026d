"""``mqstore topics`` and ``mqstore groups`` against a real broker, and on its stopped store: what
they print is checked against what real producers and consumers did and against the files."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.transport.channel import BrokerError
from tests.integration.broker import Broker, free_port_range


def _json(broker: Broker, *argv: str, code: int = 0) -> list[dict[str, Any]]:
    done = broker.mqstore(*argv, "--json")
    assert done.returncode == code, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _send(store: Path, topic: str, count: int, start: int = 0) -> list[Any]:
    with Producer(store) as producer:
        results = producer.send_batch([{"topic": topic, "body": f"m{i}".encode()} for i in range(start, start + count)])
    assert all(r.ok for r in results), results
    return results


def _consume(store: Path, group: str, topic: str, expected: int, start: str = "committed") -> list[Any]:
    got: list[Any] = []
    with Consumer(store, group=group, topic=topic, start=start, long_poll_ms=100) as consumer:
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(500)
        got += consumer.poll(200)  # nothing more than expected
        consumer.commit()
    return got


@pytest.mark.slow
def test_topics_create_update_list_delete_round_trip(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port_range(1)
    with Broker(tmp_path, broker_extra="auto_create_topics = false", remoting_port=port) as broker:
        with Producer(broker.store) as producer:
            refused = producer.send("Nowhere", b"x")
        assert not refused.ok and refused.status == "MESSAGE_ILLEGAL"
        assert "does not exist" in refused.reason and "auto_create_topics" in refused.reason
        with Admin(broker.store) as admin:
            assert admin.ping_writer()["ok"]  # refused, and still serving
            assert "Nowhere" not in admin.topics()
        with rm.RemotingClient("127.0.0.1", port) as rocketmq:  # a stock client finds no route to it
            assert rocketmq.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nowhere"}).code == rm.TOPIC_NOT_EXIST

        assert _json(broker, "topics", "create", "Orders", "--queues", "2") == [
            {"type": "topic", "topic": "Orders", "queue_count": 2}]
        assert _json(broker, "topics", "create", "Orders", "--queues", "2", code=2) == []
        assert _json(broker, "topics", "update", "Orders", "--queues", "3")[0]["queue_count"] == 3
        sent = _send(broker.store, "Orders", 9)
        with rm.RemotingClient("127.0.0.1", port) as rocketmq:
            route = json.loads(rocketmq.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"}).body)
            assert route["queueDatas"][0]["writeQueueNums"] == 3
        listed = {t["topic"]: t for t in _json(broker, "topics", "list")}
        assert listed["Orders"]["messages"] == 9
        assert [q["max_queue_offset"] for q in listed["Orders"]["queues"]] == [3, 3, 3]

        with Consumer(broker.store, group="G", topic="Orders", start="earliest", long_poll_ms=100) as consumer:
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < 9 and time.monotonic() < deadline:
                got += consumer.poll(500)
            consumer.commit()
            assert len(got) == 9
            assert {q["topic"] for q in _json(broker, "groups", "describe", "G")} == {"Orders"}

            deleted = _json(broker, "topics", "delete", "Orders")
            assert deleted == [{"type": "deleted", "topic": "Orders", "config": True, "offsets": True}]
            assert not (broker.store / "consumequeue" / "Orders").exists()
            assert "Orders" not in {t["topic"] for t in _json(broker, "topics", "list")}
            assert _json(broker, "groups", "describe", "G", code=2) == []  # its offsets went with the topic
            # the consumer that read it hears it is gone: each pull is refused, and the client says why
            with caplog.at_level(logging.WARNING, logger="mqstore.client"):
                assert consumer.poll(500) == []
            assert "pull refused (TOPIC_NOT_EXIST: topic 'Orders' was deleted)" in caplog.text
        with Admin(broker.store) as admin, pytest.raises(BrokerError) as refused_pull:
            admin._call("reader", "pull", topic="Orders", queue=0, offset=0)  # what it was told
        assert refused_pull.value.status == "TOPIC_NOT_EXIST"

        with Admin(broker.store) as admin:  # the records stay in the commitlog until retention
            for result in sent:
                message = admin.view_by_id(result.msg_id)
                assert message is not None and message.topic == "Orders" and message.phys_offset == result.phys_offset
        gone = broker.mqstore("topics", "delete", "Orders")
        assert gone.returncode == 2 and "no topic 'Orders'" in gone.stderr
        assert broker.stop() == 0

    # the stop brought the consume queues level with the commitlog, from where they were applied when
    # the topic went, not from the last record they still cover: Orders, the newest records, stays gone
    broker_made = {"SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"}  # the broker's own: delay levels and timers
    assert {t["topic"] for t in _json(broker, "topics", "list", "--all")} == broker_made
    with broker:
        assert "Orders" not in {t["topic"] for t in _json(broker, "topics", "list")}
        _json(broker, "topics", "create", "Orders", "--queues", "1")
        again = _send(broker.store, "Orders", 2)
        assert [r.queue_offset for r in again] == [0, 1]  # a topic made again starts at offset 0
        assert broker.stop() == 0


@pytest.mark.slow
def test_groups_describe_and_reset_follow_what_consumers_did(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker:
        assert broker.mqstore("topics", "create", "Orders", "--queues", "2").returncode == 0
        _send(broker.store, "Orders", 10)
        first = _consume(broker.store, "G", "Orders", 10, start="earliest")
        assert len(first) == 10
        _send(broker.store, "Orders", 4, start=10)

        described = {q["queue_id"]: q for q in _json(broker, "groups", "describe", "G")}
        for queue_id in (0, 1):
            mine = [m for m in first if m.queue_id == queue_id]
            q = described[queue_id]
            assert q["committed_offset"] == 5 and q["max_queue_offset"] == 7 and q["lag"] == 2
            assert q["last_consume_ms"] == max(m.store_ms for m in mine) > 0
        assert [g["group"] for g in _json(broker, "groups", "list")] == ["G"]

        # the consumer just committed: live, so a reset is refused unless forced
        refused = broker.mqstore("groups", "reset", "G", "--topic", "Orders", "--to", "earliest", "--execute")
        assert refused.returncode == 1 and "live consumers" in refused.stderr
        reset = _json(broker, "groups", "reset", "G", "--topic", "Orders", "--to", "earliest", "--force", "--execute")
        assert [r["target_offset"] for r in reset] == [0, 0]
        again = _consume(broker.store, "G", "Orders", 14)
        assert sorted(m.body for m in again) == sorted(f"m{i}".encode() for i in range(14))

        assert _json(broker, "groups", "reset", "G", "--topic", "Orders", "--to", "latest", "--force",
                     "--live-ms", "1", "--execute")[0]["target_offset"] == 7
        assert _consume(broker.store, "G", "Orders", 0) == []

        cut_ms = max(m.store_ms for m in first) + 1  # the four sent after the first consume, no earlier one
        later = [m for m in again if m.store_ms >= cut_ms]
        _json(broker, "groups", "reset", "G", "--topic", "Orders", "--to", str(cut_ms), "--force", "--execute")
        from_time = _consume(broker.store, "G", "Orders", len(later))
        assert sorted(m.body for m in from_time) == sorted(m.body for m in later)

        online = _json(broker, "groups", "describe", "G")
        assert broker.stop() == 0
    assert _json(broker, "groups", "describe", "G") == online  # offline, from the files
    assert [g["group"] for g in _json(broker, "groups", "list")] == ["G"]
    # a stopped store has no live consumer: its offsets are reset in the files
    assert [r["target_offset"] for r in _json(broker, "groups", "reset", "G", "--topic", "Orders", "--to",
                                             "earliest", "--execute")] == [0, 0]
    assert [(q["committed_offset"], q["lag"]) for q in _json(broker, "groups", "describe", "G")] == [(0, 7), (0, 7)]


@pytest.mark.slow
def test_a_topic_deleted_and_made_again_serves_only_its_new_messages(tmp_path: Path) -> None:
    """The reader had the first topic's queue mapped, and the flusher its file open: both follow the
    new queue, from offset 0, instead of the unlinked files of the old one."""
    with Broker(tmp_path) as broker:
        _json(broker, "topics", "create", "T", "--queues", "1")
        _send(broker.store, "T", 3)
        assert len(_consume(broker.store, "G", "T", 3, start="earliest")) == 3
        _json(broker, "topics", "delete", "T")
        _json(broker, "topics", "create", "T", "--queues", "1")
        fresh = _send(broker.store, "T", 2, start=100)
        assert [r.queue_offset for r in fresh] == [0, 1]
        got = _consume(broker.store, "H", "T", 2, start="earliest")
        assert sorted(m.body for m in got) == [b"m100", b"m101"]
        described = _json(broker, "groups", "describe", "H")
        assert [(q["committed_offset"], q["max_queue_offset"], q["lag"]) for q in described] == [(2, 2, 0)]
        assert broker.stop() == 0
