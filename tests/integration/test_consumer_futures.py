"""The consumers' future-returning calls against a real broker: ``poll_async`` / ``receive_async``
complete when messages come or their time runs out, a cancelled one hands nothing over (what it
would have taken comes with the next call, and is never committed), ``ack_async`` holds the
statuses. The blocking calls are these futures' ``result()``."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.receipts import OK
from tests.integration.broker import Broker, wait_for

LONG_MS = 60_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("futures")) as running:
        yield running


def create(broker: Broker, topic: str) -> None:
    with Admin(broker.store) as admin:
        admin.create_topic(topic, 2)


def send(broker: Broker, topic: str, *bodies: bytes) -> None:
    with Producer(broker.store) as producer:
        assert all(r.ok for r in producer.send_batch([{"topic": topic, "body": b, "queue_id": 0} for b in bodies]))


def test_poll_async_completes_with_what_is_sent_after_it_was_made(broker: Broker) -> None:
    create(broker, "FutPoll")
    with Consumer(broker.store, group="g", topic="FutPoll", start="earliest", long_poll_ms=500) as consumer:
        threads = threading.active_count()
        future = consumer.poll_async(timeout_ms=LONG_MS)
        assert not future.done()
        assert threading.active_count() == threads  # no thread waits for it
        send(broker, "FutPoll", b"one", b"two")
        assert [m.body for m in future.result(timeout=30)] == [b"one", b"two"]
        assert consumer.position(0) == 2


def test_poll_async_completes_empty_when_its_time_runs_out(broker: Broker) -> None:
    create(broker, "FutEmpty")
    with Consumer(broker.store, group="g", topic="FutEmpty", start="earliest", long_poll_ms=5000) as consumer:
        future = consumer.poll_async(timeout_ms=100)
        assert future.result(timeout=30) == []  # long before the pulls' long poll runs out
        batch = consumer.poll_batch_async(timeout_ms=0).result(timeout=30)
        assert len(batch) == 0


def test_a_cancelled_poll_hands_nothing_over_and_nothing_is_committed(broker: Broker) -> None:
    create(broker, "FutCancel")
    with Consumer(broker.store, group="cancel", topic="FutCancel", start="earliest", long_poll_ms=500,
                  auto_commit_interval_ms=0) as consumer:
        future = consumer.poll_async(timeout_ms=LONG_MS)
        assert future.cancel()
        send(broker, "FutCancel", b"kept")
        wait_for(lambda: consumer.buffered(0)[0] == 1, 30, "the message pulled into the buffer")
        with pytest.raises(CancelledError):
            future.result()
        assert consumer.position(0) == 0
        consumer.commit()
    with Admin(broker.store) as admin:
        assert admin.fetch_offset("cancel", "FutCancel", 0) in (0, -1)
    with Consumer(broker.store, group="cancel", topic="FutCancel", long_poll_ms=500) as again:
        assert [m.body for m in again.messages(1, timeout_ms=30_000)] == [b"kept"]


def test_close_answers_a_waiting_poll_and_later_polls_are_refused(broker: Broker) -> None:
    create(broker, "FutClose")
    consumer = Consumer(broker.store, group="g", topic="FutClose", start="earliest", long_poll_ms=500)
    future = consumer.poll_async(timeout_ms=LONG_MS)
    consumer.close()
    assert future.result(timeout=30) == []
    with pytest.raises(BrokerError):
        consumer.poll(timeout_ms=10)


def test_receive_async_and_ack_async(broker: Broker) -> None:
    create(broker, "FutAck")
    with AckConsumer(broker.store, group="fa", topic="FutAck", visibility_ms=LONG_MS, long_poll_ms=500) as consumer:
        cancelled = consumer.receive_async(max_count=10, timeout_ms=LONG_MS)
        assert cancelled.cancel()
        future = consumer.receive_async(max_count=10, timeout_ms=LONG_MS)
        assert not future.done()
        send(broker, "FutAck", b"a", b"b")
        got = future.result(timeout=30)
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got += consumer.receive(10, 200)
        assert sorted(d.body for d in got) == [b"a", b"b"]
        assert consumer.ack_async(got).result(timeout=30) == [OK, OK]
        assert consumer.receive_async(timeout_ms=100).result(timeout=30) == []


def test_iterating_a_consumer_yields_each_message_and_stops_on_close_inside_the_loop(broker: Broker) -> None:
    create(broker, "IterIn")
    send(broker, "IterIn", b"m0", b"m1", b"m2")
    seen = []
    with Consumer(broker.store, group="iter", topic="IterIn", start="earliest", long_poll_ms=500) as consumer:
        for message in consumer:
            seen.append(message.body)
            if len(seen) == 2:
                consumer.close()  # the loop ends; the third message was never handed over
    assert seen == [b"m0", b"m1"]
    with Admin(broker.store) as admin:
        assert admin.fetch_offset("iter", "IterIn", 0) == 2  # committed: what the loop had, no more
    with Consumer(broker.store, group="iter", topic="IterIn", long_poll_ms=500) as again:
        assert [m.body for m in again.messages(1, timeout_ms=30_000)] == [b"m2"]


def test_iterating_a_consumer_waits_for_messages_and_stops_when_another_thread_closes_it(broker: Broker) -> None:
    create(broker, "IterOut")
    consumer = Consumer(broker.store, group="iter", topic="IterOut", start="earliest", long_poll_ms=500)
    seen: list[bytes] = []
    loop = threading.Thread(target=lambda: seen.extend(m.body for m in consumer))
    loop.start()
    send(broker, "IterOut", b"late")
    wait_for(lambda: seen == [b"late"], 30, "the message sent while the loop waited")
    assert loop.is_alive()  # waiting for the next one
    consumer.close()
    loop.join(timeout=30)
    assert not loop.is_alive()


def test_iterating_an_ack_consumer_yields_deliveries_until_closed(broker: Broker) -> None:
    create(broker, "IterAck")
    send(broker, "IterAck", b"d0", b"d1")
    seen = []
    with AckConsumer(broker.store, group="iterack", topic="IterAck", visibility_ms=LONG_MS,
                     long_poll_ms=500) as consumer:
        for delivery in consumer:
            seen.append(delivery.body)
            assert consumer.ack(delivery) == [OK]
            if len(seen) == 2:
                consumer.close()
    assert seen == [b"d0", b"d1"]
    consumer = AckConsumer(broker.store, group="iterack", topic="IterAck", long_poll_ms=500)
    loop = threading.Thread(target=lambda: seen.extend(d.body for d in consumer))
    loop.start()
    send(broker, "IterAck", b"d2")
    wait_for(lambda: len(seen) == 3, 30, "the delivery sent while the loop waited")
    consumer.close()
    loop.join(timeout=30)
    assert not loop.is_alive() and seen == [b"d0", b"d1", b"d2"]


def test_a_served_poll_is_let_go_of_before_its_timer_would_have_run(broker: Broker) -> None:
    """A served poll's answer (megabytes of ZeroMQ's buffers, at full speed) was held by its timer
    until the poll's timeout: each batch's memory went back to the system before the next reply came."""
    create(broker, "FutFreed")
    with Consumer(broker.store, group="g", topic="FutFreed", start="earliest", long_poll_ms=500) as consumer, \
            AckConsumer(broker.store, group="fa", topic="FutFreed", visibility_ms=LONG_MS, long_poll_ms=500) as acks:
        polled = consumer.poll_async(timeout_ms=LONG_MS)
        received = acks.receive_async(max_count=10, timeout_ms=LONG_MS)
        send(broker, "FutFreed", b"one")
        assert [m.body for m in polled.result(timeout=30)] == [b"one"]
        assert [d.body for d in received.result(timeout=30)] == [b"one"]
        futures = [weakref.ref(polled), weakref.ref(received)]
        del polled, received
        # the I/O thread lets go of each as it returns from completing it: long before LONG_MS
        wait_for(lambda: all(f() is None for f in futures), 10, "the served futures freed")


def test_a_consumer_is_made_without_waiting_and_its_first_poll_says_no_broker_answers(tmp_path: Path) -> None:
    """The constructor waited on the calling thread for the topic's queues and the group's offsets
    (an event loop's thread, for mqstore.aio): with no broker, for its whole timeout, then raised."""
    endpoints = Endpoints.for_store(str(tmp_path / "nobody"))
    consumer = Consumer(endpoints=endpoints, group="g", topic="T", timeout_ms=500)  # raised here before
    try:
        future = consumer.poll_async(timeout_ms=10)  # shorter than the question's timeout: still told
        with pytest.raises(BrokerTimeoutError, match="queue_info"):
            future.result(timeout=30)
        with pytest.raises(BrokerTimeoutError):  # and every poll after it: the consumer has no queues
            consumer.poll(timeout_ms=0)
        with pytest.raises(BrokerTimeoutError):
            consumer.ready()
    finally:
        consumer.close()  # nothing to commit, nothing raised


def test_a_consumer_made_before_a_poll_is_ready_with_its_queues_and_committed_offsets(broker: Broker) -> None:
    create(broker, "FutReady")
    send(broker, "FutReady", b"a", b"b", b"c")
    with Consumer(broker.store, group="ready", topic="FutReady", start="earliest") as first:
        assert [m.body for m in first.messages(3, timeout_ms=30_000)] == [b"a", b"b", b"c"]
    with Consumer(broker.store, group="ready", topic="FutReady") as again:
        again.ready()
        assert again.queues == [0, 1] and again.position(0) == 3  # committed by the first one's close
        send(broker, "FutReady", b"d")
        assert [m.body for m in again.messages(1, timeout_ms=30_000)] == [b"d"]
