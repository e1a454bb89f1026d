"""Consumers that start before their topic exists, and follow queues added later, learning of them
from a watch reader 0 answers when the topic's queues change (not by asking again and again)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.client.topic_watch import WATCH_WAIT_MS
from tests.integration.broker import Broker, wait_for

IDLE_WINDOW_S = 3.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("watch")) as running:
        yield running


def test_a_consumer_started_before_its_topic_exists_gets_the_first_message_sent_to_it(broker: Broker) -> None:
    with Consumer(broker.store, group="early", topic="NoSuchYet", long_poll_ms=500) as consumer:
        assert consumer.queues == []
        with Producer(broker.store) as producer:
            assert producer.send("NoSuchYet", b"first").ok
        assert [m.body for m in consumer.messages(1, timeout_ms=30_000)] == [b"first"]


def test_an_ack_consumer_started_before_its_topic_exists_gets_the_first_message(broker: Broker) -> None:
    with AckConsumer(broker.store, group="early-ack", topic="NoSuchAck", long_poll_ms=500) as consumer:
        assert consumer.queues == []
        with Producer(broker.store) as producer:
            assert producer.send("NoSuchAck", b"first").ok
        got = wait_for(lambda: consumer.receive(1, timeout_ms=200), 30, "the first delivery")
        assert [d.body for d in got] == [b"first"]


@pytest.mark.parametrize("kind", ["offsets", "acks"])
def test_a_running_consumer_gets_messages_sent_to_queues_added_by_topics_update(broker: Broker, kind: str) -> None:
    topic = f"Grows-{kind}"
    with Admin(broker.store) as admin:
        admin.create_topic(topic, 1)
    consumer: Consumer | AckConsumer = (
        Consumer(broker.store, group="grow", topic=topic, start="latest", long_poll_ms=500) if kind == "offsets"
        else AckConsumer(broker.store, group="grow", topic=topic, long_poll_ms=500))
    with consumer:
        assert consumer.queues == [0]
        result = broker.mqstore("topics", "update", topic, "--queues", "3")
        assert result.returncode == 0, result.stderr
        wait_for(lambda: consumer.queues == [0, 1, 2], 30, "the new queues followed")
        with Producer(broker.store) as producer:
            for queue in (1, 2):
                assert producer.send(topic, f"q{queue}".encode(), queue_id=queue).ok
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            if isinstance(consumer, Consumer):
                got += [m.body for m in consumer.poll(timeout_ms=200)]
            else:
                got += [d.body for d in consumer.receive(10, timeout_ms=200)]
        assert sorted(got) == [b"q1", b"q2"]


def test_an_idle_consumer_of_a_missing_topic_sends_one_watch_per_long_poll_not_a_poll_each_moment(
        broker: Broker) -> None:
    with Consumer(broker.store, group="idle", topic="NeverMade", long_poll_ms=500) as consumer:
        sent: list[str] = []
        call = consumer._channel.call

        def counted(route: str, op: Any, **kwargs: Any) -> Future[dict[str, Any]]:
            sent.append(type(op).__name__)
            return call(route, op, **kwargs)

        consumer._channel.call = counted  # type: ignore[method-assign]
        time.sleep(IDLE_WINDOW_S)  # a window to count in, not a wait for anything
        # the watch already out when counting began runs for up to WATCH_WAIT_MS: at most one more each period
        assert len(sent) <= 1 + int(IDLE_WINDOW_S * 1000 // WATCH_WAIT_MS), sent
        assert consumer.poll(timeout_ms=0) == []
