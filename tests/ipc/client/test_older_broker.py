"""A client newer than its broker: a reader that answers the spanning pulls (``pull_queues``,
``ack_pull_queues``) UNKNOWN_OP is asked with one pull per queue from then on, and the consumers
serve on instead of failing."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Consumer
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.messages import record_to_wire
from tests.ipc.client.test_client_schema import WAIT_S, FakeBroker, packed, sample_record
from tests.ipc.client.test_client_schema import broker as broker  # the fixtures, found by their names
from tests.ipc.client.test_client_schema import endpoints as endpoints


def serving(broker: FakeBroker, handler: Callable[[dict[str, Any]], dict[str, Any] | None]
            ) -> tuple[threading.Thread, threading.Event]:
    """A thread answering every request with ``handler`` (None: left unanswered, a parked pull) until
    the event is set."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                endpoint, identity, request = broker.received.get(timeout=0.05)
            except queue.Empty:
                continue
            reply = handler(request)
            if reply is not None:
                broker.reply(endpoint, identity, reply)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, stop


def unknown(request: dict[str, Any]) -> dict[str, Any]:
    return schema.error_reply(request["id"], schema.UNKNOWN_OP, f"unknown op {request['op']!r}")


def test_a_consumer_pulls_queue_by_queue_from_a_reader_that_knows_no_pull_queues(
        endpoints: Endpoints, broker: FakeBroker) -> None:
    log: list[dict[str, Any]] = []
    lock = threading.Lock()

    def reader(request: dict[str, Any]) -> dict[str, Any] | None:
        with lock:
            log.append(request)
        op = request["op"]
        if op == "queue_info":
            return schema.ok_reply(request["id"], queues={"0": [0, 8], "1": [0, 8]})
        if op == "fetch_offset":
            return schema.ok_reply(request["id"], offset=5)
        if op == "pull_queues":
            return unknown(request)
        if op == "pull" and request["offset"] == 5:
            records = [dataclasses.replace(sample_record(queue_offset=i), queue_id=request["queue"]) for i in (5, 6, 7)]
            return schema.ok_reply(request["id"], status="FOUND", next=8, min=0, max=8, **packed(records))
        return None  # the queue's end: parked, longer than the polls wait

    server, stop = serving(broker, reader)
    with Consumer(endpoints=endpoints, group="g", topic="T", long_poll_ms=50, auto_commit=False) as consumer:
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 6 and time.monotonic() < deadline:
            got += [(m.queue_id, m.queue_offset) for m in consumer.poll(timeout_ms=100)]
        assert sorted(got) == [(q, o) for q in (0, 1) for o in (5, 6, 7)]
        assert consumer.poll(timeout_ms=100) == []
    stop.set()
    server.join(WAIT_S)
    with lock:
        ops = [(r["op"], r.get("queue"), r.get("offset")) for r in log if r["op"] in ("pull", "pull_queues")]
    spans = [op for op in ops if op[0] == "pull_queues"]
    assert spans and ops[:len(spans)] == spans  # only those in flight before the refusal: the route is remembered
    assert sorted(ops[len(spans):]) == [("pull", 0, 5), ("pull", 0, 8), ("pull", 1, 5), ("pull", 1, 8)]


def test_an_ack_consumer_pulls_queue_by_queue_from_a_reader_that_knows_no_ack_pull_queues(
        endpoints: Endpoints, broker: FakeBroker) -> None:
    log: list[dict[str, Any]] = []
    lock = threading.Lock()
    served: set[int] = set()

    def reader(request: dict[str, Any]) -> dict[str, Any] | None:
        with lock:
            log.append(request)
        op = request["op"]
        if op == "ack_pull_queues":
            return unknown(request)
        if op == "ack_pull" and request["queue"] not in served:
            served.add(request["queue"])
            wire = record_to_wire(dataclasses.replace(sample_record(queue_offset=3), queue_id=request["queue"]))
            return schema.ok_reply(request["id"], msgs=[dict(wire, seq=3, redelivered=False, delivery_count=1)])
        if op == "ack_release":
            return schema.ok_reply(request["id"], released=0)
        return None  # nothing more: parked

    server, stop = serving(broker, reader)
    with AckConsumer(endpoints=endpoints, group="g", topic="T", queues=[0, 1], reader_count=1,
                     long_poll_ms=50) as consumer:
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 2 and time.monotonic() < deadline:
            got += [(d.receipt.queue_id, d.receipt.seq) for d in consumer.receive(10, 100)]
        assert sorted(got) == [(0, 3), (1, 3)]
        assert consumer.receive(10, 100) == []
    stop.set()
    server.join(WAIT_S)
    with lock:
        ops = [(r["op"], r.get("queue"), r.get("queues")) for r in log if r["op"] in ("ack_pull", "ack_pull_queues")]
    assert ops[0] == ("ack_pull_queues", None, [0, 1])  # both queues in one request
    assert [op for op in ops if op[0] == "ack_pull_queues"] == [ops[0]]  # asked once: the route is remembered
    assert {op for op in ops[1:]} == {("ack_pull", 0, None), ("ack_pull", 1, None)}
