"""Spanning ack pulls (``ack_pull_queues``) against a real broker (two readers): several queues
answered by one request and marked delivered in each queue's index, a parked request answered when
any of its queues has something (a new message, a nack, an ack that makes room), redelivery and the
dead-letter queue through it, the reply's bounds shared fairly, a SIGKILLed reader losing nothing,
and malformed requests refused with a status while the reader serves on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.receipts import NOT_OWNER, OK, UNKNOWN_RECEIPT, ack_owner
from mqstore.ipc.wire.requests.acks import MAX_SPAN_QUEUES
from tests.integration.broker import Broker, wait_for
from tests.integration.test_ack import dead_letters, produce

READERS = 2
QUEUES = 8
REPLY_MS = 10_000
LONG_MS = 120_000
BROKER_EXTRA = """ack_visibility_timeout_ms = 120000
ack_max_deliveries = 2
ack_prefetch = 4096
fetch_max_count = 30"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("ackspan"), readers=READERS, broker_extra=BROKER_EXTRA,
                extra_toml='\n[store]\nmessage_delay_level = "1s 1s 1s 1s"\n') as running:
        yield running


class Reader:
    """A DEALER to one reader: requests sent, replies read in the order they come."""

    def __init__(self, broker: Broker, index: int) -> None:
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(Endpoints.for_store(broker.store, READERS).reader(index))
        self._ids = iter(range(1, 1 << 30))
        self._early: dict[int, dict[str, Any]] = {}

    def send(self, op: str, **fields: Any) -> int:
        request_id = next(self._ids)
        self.sock.send(schema.pack(schema.request(op, request_id, **fields)))
        return request_id

    def reply(self, request_id: int, timeout_ms: int = REPLY_MS) -> dict[str, Any]:
        """The reply to ``request_id``; others that come first are kept for their turn."""
        while request_id not in self._early:
            assert self.sock.poll(timeout_ms), f"no reply to request {request_id}"
            message: dict[str, Any] = schema.unpack(self.sock.recv())
            self._early[message["id"]] = message
        return self._early.pop(request_id)

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        return self.reply(self.send(op, **fields))

    def close(self) -> None:
        self.ctx.destroy(linger=0)


@pytest.fixture()
def reader0(broker: Broker) -> Iterator[Reader]:
    reader = Reader(broker, 0)
    yield reader
    reader.close()


def owned(group: str, topic: str, reader: int = 0) -> list[int]:
    return [q for q in range(QUEUES) if ack_owner(group, topic, q, READERS) == reader]


def topic(broker: Broker, name: str, per_queue: int) -> None:
    with Admin(broker.store) as admin:
        admin.create_topic(name, QUEUES)
    if per_queue:
        produce(broker, name, per_queue * QUEUES)  # round robin: per_queue on each queue
        with Admin(broker.store) as admin:
            wait_for(lambda: all(hi == per_queue for _, hi in admin.queue_info(name).values()), 10,
                     "every message consumable")


def span(reader: Reader, group: str, name: str, queues: list[int], **fields: Any) -> list[dict[str, Any]]:
    reply = reader.call("ack_pull_queues", group=group, topic=name, queues=queues, consumer="c", **fields)
    assert reply["ok"], reply
    msgs: list[dict[str, Any]] = reply["msgs"]
    return msgs


def by_queue(msgs: list[dict[str, Any]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for m in msgs:
        out.setdefault(m["queue"], []).append(m["seq"])
    return out


def receipts(group: str, name: str, msgs: list[dict[str, Any]]) -> list[list[Any]]:
    return [[group, name, m["queue"], m["seq"]] for m in msgs]


def test_one_request_serves_every_queue_and_marks_each_delivered(broker: Broker, reader0: Reader) -> None:
    topic(broker, "Many", 3)
    queues = owned("S1", "Many")
    assert len(queues) >= 2
    first = span(reader0, "S1", "Many", queues, max=2)  # each queue's part bounded by max
    assert by_queue(first) == {q: [0, 1] for q in queues}
    assert all(not m["redelivered"] and m["delivery_count"] == 1 for m in first)
    rest = span(reader0, "S1", "Many", queues)
    assert by_queue(rest) == {q: [2] for q in queues}
    # delivered in each queue's index: neither another consumer nor another span gets them again
    assert reader0.call("ack_pull", group="S1", topic="Many", queue=queues[0], consumer="other")["msgs"] == []
    assert span(reader0, "S1", "Many", queues) == []
    acked = reader0.call("ack", receipts=receipts("S1", "Many", first + rest))
    assert acked["results"] == [OK] * len(first + rest)
    again = reader0.call("ack", receipts=receipts("S1", "Many", first[:1]))
    assert again["results"] == [UNKNOWN_RECEIPT]


def test_a_parked_span_is_answered_when_any_of_its_queues_gets_a_message(broker: Broker, reader0: Reader) -> None:
    topic(broker, "Parked", 0)
    queues = owned("S2", "Parked")
    parked = reader0.send("ack_pull_queues", group="S2", topic="Parked", queues=queues, consumer="c",
                          wait_ms=30_000)
    wait_for(lambda: reader0.call("ping")["parked"] == 1, 10, "the span parked once, under all its queues")
    assert not reader0.sock.poll(0)
    produce(broker, "Parked", 1, queue=queues[-1])
    reply = reader0.reply(parked)
    assert reply["ok"] and by_queue(reply["msgs"]) == {queues[-1]: [0]}
    assert reader0.call("ping")["parked"] == 0  # no longer parked under its other queues
    assert reader0.call("ack", receipts=receipts("S2", "Parked", reply["msgs"]))["results"] == [OK]


def test_nack_and_ack_wake_a_parked_span_and_redelivery_goes_through_it(broker: Broker, reader0: Reader) -> None:
    topic(broker, "Again", 1)
    queues = owned("S3", "Again")
    [a, b] = queues[:2]
    got = span(reader0, "S3", "Again", [a, b], prefetch=1)
    assert by_queue(got) == {a: [0], b: [0]}
    produce(broker, "Again", 1, queue=a)  # queue a has more, but the consumer holds its prefetch there
    parked = reader0.send("ack_pull_queues", group="S3", topic="Again", queues=[a, b], consumer="c", prefetch=1,
                          wait_ms=30_000)
    wait_for(lambda: reader0.call("ping")["parked"] == 1, 10, "the span parked: no room on either queue")
    on_a = next(m for m in got if m["queue"] == a)
    on_b = next(m for m in got if m["queue"] == b)
    assert reader0.call("ack", receipts=receipts("S3", "Again", [on_a]))["results"] == [OK]  # room on a
    assert by_queue(reader0.reply(parked)["msgs"]) == {a: [1]}
    # a nack: back after the retry delay, flagged, through a parked span
    parked = reader0.send("ack_pull_queues", group="S3", topic="Again", queues=[b], consumer="c", prefetch=1,
                          wait_ms=30_000)
    assert reader0.call("nack", receipts=receipts("S3", "Again", [on_b]))["results"] == [OK]
    [back] = reader0.reply(parked)["msgs"]
    assert (back["queue"], back["seq"], back["redelivered"], back["delivery_count"]) == (b, 0, True, 2)
    # at ack_max_deliveries, a nack sends it to the dead-letter queue, once
    assert reader0.call("nack", receipts=receipts("S3", "Again", [back]))["results"] == [OK]
    [dead] = dead_letters(broker, "S3", 1)
    assert dead.properties["ORIGIN_QUEUE"] == str(b) and dead.properties["ORIGIN_OFFSET"] == "0"
    assert span(reader0, "S3", "Again", [b], prefetch=1) == []


def test_a_deep_backlog_does_not_starve_the_other_queues(broker: Broker, reader0: Reader) -> None:
    topic(broker, "Deep", 0)
    queues = owned("S4", "Deep")[:3]
    produce(broker, "Deep", 100, queue=queues[0])
    for q in queues[1:]:
        produce(broker, "Deep", 4, queue=q)
    with Admin(broker.store) as admin:
        wait_for(lambda: admin.queue_info("Deep")[queues[-1]][1] == 4, 10, "the messages consumable")
    got = by_queue(span(reader0, "S4", "Deep", queues, max=100))
    assert sum(len(v) for v in got.values()) <= 30, got  # [broker] fetch_max_count, the whole reply's
    assert set(got) == set(queues) and all(got[q] == [0, 1, 2, 3] for q in queues[1:]), got
    assert len(got[queues[0]]) >= 10  # an equal share of what is left, whichever queue was served first


def test_a_sigkilled_reader_loses_nothing_a_span_delivered(broker: Broker) -> None:
    topic(broker, "Killed", 50)
    queues = owned("S5", "Killed")
    reader = Reader(broker, 0)
    try:
        got: list[dict[str, Any]] = []
        while len(got) < 50 * len(queues):
            more = span(reader, "S5", "Killed", queues, max=32)
            assert more, f"got {len(got)}"
            got += more
        acked = [m for m in got if m["seq"] % 3 == 0]
        assert reader.call("ack", receipts=receipts("S5", "Killed", acked))["results"] == [OK] * len(acked)
    finally:
        reader.close()
    old = broker.kill("reader-0")
    broker.wait_restarted("reader-0", old)
    reader = Reader(broker, 0)
    try:
        # delivered before the kill and not acked: handed out again at once, flagged, as after any
        # crash (the index's deliver records replayed); nothing acked comes again
        again: list[dict[str, Any]] = []
        while (more := span(reader, "S5", "Killed", queues, max=32)):
            again += more
        assert reader.call("ack", receipts=receipts("S5", "Killed", acked[:5]))["results"] == [UNKNOWN_RECEIPT] * 5
    finally:
        reader.close()
    unacked = {(m["queue"], m["seq"]) for m in got} - {(m["queue"], m["seq"]) for m in acked}
    assert {(m["queue"], m["seq"]) for m in again} == unacked and len(again) == len(unacked)
    assert all(m["redelivered"] and m["delivery_count"] == 2 for m in again)


def test_malformed_spans_are_refused_and_the_reader_serves_on(broker: Broker, reader0: Reader) -> None:
    topic(broker, "Bad", 1)
    mine, theirs = owned("S6", "Bad"), owned("S6", "Bad", 1)
    good = {"group": "S6", "topic": "Bad", "consumer": "c"}
    bad: list[dict[str, Any]] = [
        {**good, "queues": []},
        {**good, "queues": [mine[0], mine[0]]},
        {**good, "queues": list(range(MAX_SPAN_QUEUES + 1))},
        {**good, "queues": ["0"]},
        {**good, "queues": [-1]},
        {**good, "queues": mine[0]},
        {**good, "queues": mine, "wait_ms": 10**12},
        {**good, "queues": mine, "max": 0},
        {**good, "queues": mine, "prefetch": 5000},  # past [broker] ack_prefetch
        {"group": "a/b", "topic": "Bad", "consumer": "c", "queues": mine},
        {"group": "S6", "topic": "Bad", "queues": mine},
        {},
    ]
    for fields in bad:
        reply = reader0.call("ack_pull_queues", **fields)
        assert not reply["ok"] and reply["status"] == schema.BAD_REQUEST and reply["reason"], (fields, reply)
    foreign = reader0.call("ack_pull_queues", **good, queues=[*mine, theirs[0]])
    assert (foreign["ok"], foreign["status"]) == (False, NOT_OWNER)
    nowhere = next(q for q in range(QUEUES, 256) if ack_owner("S6", "Bad", q, READERS) == 0)  # no such queue
    assert by_queue(span(reader0, "S6", "Bad", [*mine, nowhere])) == {q: [0] for q in mine}
    assert reader0.call("ping")["ok"]


def test_an_ack_consumer_waits_on_all_its_queues_of_a_reader_in_one_request(broker: Broker) -> None:
    topic(broker, "Waits", 0)
    readers = [Reader(broker, i) for i in range(READERS)]
    try:
        with AckConsumer(broker.store, group="S7", topic="Waits", long_poll_ms=5000) as consumer:
            assert consumer.queues == list(range(QUEUES))
            assert consumer.receive(10, 0) == []  # the pulls go out
            # eight idle queues over two readers: one request parked on each (eight before)
            wait_for(lambda: [r.call("ping")["parked"] for r in readers] == [1] * READERS, 10,
                     "one parked pull per reader")
            produce(broker, "Waits", 1, queue=QUEUES - 1)
            [got] = consumer.receive(10, REPLY_MS)
            assert (got.receipt.queue_id, got.receipt.seq, got.redelivered) == (QUEUES - 1, 0, False)
            assert consumer.ack(got) == [OK]
    finally:
        for reader in readers:
            reader.close()
