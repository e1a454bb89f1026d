"""A Consumer's pulls spanning its queues on one reader, against a real broker: the queues a reader
holds wait in one parked request (counted by the reader), a message on any of them comes, and a
queue added later joins the reader's spanning pull."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mqstore.ipc.client.api import Admin, Consumer, Producer
from tests.integration.broker import Broker, wait_for

TOPIC = "Spans"


def reader_stats(broker: Broker) -> dict[str, Any]:
    status = broker.status()
    assert status is not None
    stats: dict[str, Any] = status["actors"]["reader-0"]
    return stats


def test_a_consumer_waits_on_all_its_queues_of_a_reader_in_one_request(tmp_path: Path) -> None:
    with Broker(tmp_path, readers=1) as broker:
        with Admin(broker.store) as admin:
            admin.create_topic(TOPIC, 4)
        with Consumer(broker.store, group="spans", topic=TOPIC, start="earliest", long_poll_ms=2000,
                      auto_commit=False) as consumer:
            assert consumer.queues == [0, 1, 2, 3]
            # four idle queues, one request parked for them all (one pull each, before)
            wait_for(lambda: reader_stats(broker).get("parked") == 1, 30, "one parked pull for the four queues")
            with Producer(broker.store) as producer:
                for queue in range(4):
                    assert producer.send(TOPIC, f"q{queue}".encode(), queue_id=queue).ok
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 4 and time.monotonic() < deadline:
                got += [m.body for m in consumer.poll(timeout_ms=200)]
            assert sorted(got) == [b"q0", b"q1", b"q2", b"q3"]
            # the reader's report comes a moment later
            stats = wait_for(lambda: (s := reader_stats(broker))["span_pulls"] >= 2 and s, 30, "the reader's count")
            assert stats["pulls"] == 0, stats

            # a queue added later joins: pulled at once in a request of its own, then with the others
            result = broker.mqstore("topics", "update", TOPIC, "--queues", "6")
            assert result.returncode == 0, result.stderr
            wait_for(lambda: consumer.queues == [0, 1, 2, 3, 4, 5], 30, "the new queues followed")
            with Producer(broker.store) as producer:
                assert producer.send(TOPIC, b"q5", queue_id=5).ok
            came = wait_for(lambda: consumer.poll(timeout_ms=200), 30, "the new queue's message")
            assert [(m.queue_id, m.body) for m in came] == [(5, b"q5")]
            wait_for(lambda: reader_stats(broker).get("parked") == 1, 30, "one parked pull for the six queues")
            assert reader_stats(broker)["pulls"] == 0
            assert [consumer.position(q) for q in range(6)] == [1, 1, 1, 1, 0, 1]
