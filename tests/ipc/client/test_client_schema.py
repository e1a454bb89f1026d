"""The client library against a fake broker: a ROUTER in a thread that hands each request to the test
and sends whatever the test tells it to. Request encoding, reply matching by id, stale replies,
timeouts, refusals, retries, and the consumer's pull/commit cycle."""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq

from mqstore.engine import Host, PutStatus, Record
from mqstore.engine.log.record import encode_record
from mqstore.ipc.client.api import (
    Admin,
    BrokerError,
    BrokerTimeoutError,
    Consumer,
    Outgoing,
    Producer,
    ReceivedMessage,
    ReplyError,
    SendResult,
)
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.messages import record_to_wire, stored_parts

WAIT_S = 5.0


class FakeBroker:
    """Binds ROUTERs at the given endpoints; requests go to ``received``, replies come from ``reply``."""

    def __init__(self, endpoints: list[str]) -> None:
        self.received: queue.Queue[tuple[str, bytes, Any]] = queue.Queue()
        self._outbox: queue.Queue[tuple[str, bytes, bytes]] = queue.Queue()
        self._stop = threading.Event()
        self._bound = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(endpoints,), daemon=True)
        self._thread.start()
        assert self._bound.wait(WAIT_S)

    def _run(self, endpoints: list[str]) -> None:
        ctx: zmq.Context[Any] = zmq.Context()
        routers = {}
        for endpoint in endpoints:
            sock = ctx.socket(zmq.ROUTER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.bind(endpoint)
            routers[endpoint] = sock
        self._bound.set()
        poller = zmq.Poller()
        for sock in routers.values():
            poller.register(sock, zmq.POLLIN)
        while not self._stop.is_set():
            for sock, _ in poller.poll(10):
                identity, frame = sock.recv_multipart()
                try:
                    decoded: Any = msgpack.unpackb(frame, raw=False)
                except ValueError:
                    decoded = None
                endpoint = next(e for e, s in routers.items() if s is sock)
                self.received.put((endpoint, identity, decoded))
            while True:
                try:
                    endpoint, identity, frames = self._outbox.get_nowait()
                except queue.Empty:
                    break
                routers[endpoint].send_multipart([identity, *frames])
        for sock in routers.values():
            sock.close()
        ctx.term()

    def next_request(self) -> tuple[str, bytes, dict[str, Any]]:
        return self.received.get(timeout=WAIT_S)

    def reply(self, endpoint: str, identity: bytes, message: dict[str, Any] | bytes) -> None:
        if isinstance(message, bytes):
            frames = [message]
        else:  # a packed reply's parts follow its map, as a reader sends them
            frames = schema.pack_message({k: v for k, v in message.items() if k != "parts"}, message.get("parts", ()))
        self._outbox.put((endpoint, identity, frames))

    def serve(self, handler: Any, count: int | None = None, *, until_op: str | None = None) -> None:
        """Answer requests with ``handler(request)`` (None: leave it unanswered, a parked pull): the
        next ``count`` of them, or up to and including the first ``until_op``."""
        served = 0
        while count is None or served < count:
            endpoint, identity, request = self.next_request()
            reply = handler(request)
            if reply is not None:
                self.reply(endpoint, identity, reply)
            served += 1
            if request["op"] == until_op:
                return

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def endpoints() -> Iterator[Endpoints]:
    run_dir = tempfile.mkdtemp(prefix="mq", dir="/tmp")
    os.chmod(run_dir, 0o700)
    yield Endpoints(Path(run_dir), 2)
    shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture
def broker(endpoints: Endpoints) -> Iterator[FakeBroker]:
    fake = FakeBroker([endpoints.ingress, endpoints.reader(0), endpoints.reader(1)])
    yield fake
    fake.close()


def put_ok(index: int) -> dict[str, Any]:
    return {"status": "PUT_OK", "msg_id": f"ID{index}", "queue": 1, "queue_offset": index, "phys_offset": 100 * index,
            "uniq_key": f"U{index}"}


def test_send_encodes_a_versioned_request_and_decodes_the_result(endpoints: Endpoints, broker: FakeBroker) -> None:
    with Producer(endpoints=endpoints) as producer:
        future = producer.send_async("Orders", b"\x00body", tags="paid", keys=["k1", "k2"],
                                     properties={"color": "red"}, queue_id=1)
        endpoint, identity, request = broker.next_request()
        assert endpoint == endpoints.ingress
        assert request["v"] == schema.VERSION and request["op"] == "send" and isinstance(request["id"], int)
        assert request["msgs"] == [{"topic": "Orders", "body": b"\x00body", "tags": "paid", "keys": ["k1", "k2"],
                                    "props": {"color": "red"}, "queue": 1, "flag": 0, "reconsume_times": 0}]
        broker.reply(endpoint, identity, schema.ok_reply(request["id"], results=[put_ok(7)]))
        result = future.result(WAIT_S)
    assert result == SendResult(PutStatus.PUT_OK, "ID7", 1, 7, 700, "U7", "")
    assert result.ok


def test_replies_are_matched_by_id_not_by_order(endpoints: Endpoints, broker: FakeBroker) -> None:
    with Producer(endpoints=endpoints) as producer:
        first = producer.send_async("T", b"1")
        second = producer.send_async("T", b"2")
        requests = [broker.next_request() for _ in range(2)]
        by_body = {r[2]["msgs"][0]["body"]: r for r in requests}
        for body, index in ((b"2", 2), (b"1", 1)):  # answered in reverse
            endpoint, identity, request = by_body[body]
            broker.reply(endpoint, identity, schema.ok_reply(request["id"], results=[put_ok(index)]))
        assert first.result(WAIT_S).queue_offset == 1
        assert second.result(WAIT_S).queue_offset == 2


def test_a_timed_out_request_raises_and_its_late_reply_is_ignored(endpoints: Endpoints,
                                                                  broker: FakeBroker) -> None:
    with Producer(endpoints=endpoints, timeout_ms=200) as producer:
        late = producer.send_async("T", b"late")
        endpoint, identity, stale = broker.next_request()
        with pytest.raises(BrokerTimeoutError):
            late.result(WAIT_S)
        assert issubclass(BrokerTimeoutError, TimeoutError)
        fresh = producer.send_async("T", b"fresh")
        _, _, request = broker.next_request()
        broker.reply(endpoint, identity, schema.ok_reply(stale["id"], results=[put_ok(1)]))  # too late
        broker.reply(endpoint, identity, b"\xc1 not msgpack")
        broker.reply(endpoint, identity, schema.ok_reply(request["id"], results=[put_ok(2)]))
        assert fresh.result(WAIT_S).queue_offset == 2


def test_a_refused_request_raises_broker_error(endpoints: Endpoints, broker: FakeBroker) -> None:
    with Producer(endpoints=endpoints) as producer:
        future = producer.send_async("T", b"x")
        endpoint, identity, request = broker.next_request()
        broker.reply(endpoint, identity, schema.error_reply(request["id"], schema.BAD_REQUEST, "no such thing"))
        with pytest.raises(BrokerError) as caught:
            future.result(WAIT_S)
    assert caught.value.status == schema.BAD_REQUEST and caught.value.reason == "no such thing"


def test_service_not_available_is_retried_for_the_refused_messages_only(endpoints: Endpoints,
                                                                       broker: FakeBroker) -> None:
    with Producer(endpoints=endpoints, retries=2, retry_backoff_ms=10) as producer:
        future: Future[list[SendResult]] = producer.send_batch_async(
            [Outgoing("T", b"a"), {"topic": "T", "body": b"b", "shard": "s"}, Outgoing("T", b"c")])
        endpoint, identity, request = broker.next_request()
        assert [m["body"] for m in request["msgs"]] == [b"a", b"b", b"c"]
        assert request["msgs"][1]["shard"] == "s"
        busy = {"status": "SERVICE_NOT_AVAILABLE", "reason": "disk full"}
        broker.reply(endpoint, identity, schema.ok_reply(request["id"], results=[put_ok(0), busy, put_ok(2)]))
        endpoint, identity, retry = broker.next_request()
        assert [m["body"] for m in retry["msgs"]] == [b"b"] and retry["id"] != request["id"]
        broker.reply(endpoint, identity, schema.ok_reply(retry["id"], results=[put_ok(1)]))
        assert [r.queue_offset for r in future.result(WAIT_S)] == [0, 1, 2]


def test_service_not_available_is_returned_once_retries_run_out(endpoints: Endpoints, broker: FakeBroker) -> None:
    busy = {"status": "SERVICE_NOT_AVAILABLE", "reason": "disk full"}
    with Producer(endpoints=endpoints, retries=1, retry_backoff_ms=10) as producer:
        future = producer.send_async("T", b"x")
        broker.serve(lambda request: schema.ok_reply(request["id"], results=[busy]), 2)
        result = future.result(WAIT_S)
    assert not result.ok and result.status == "SERVICE_NOT_AVAILABLE" and result.reason == "disk full"


def test_callback_runs_with_the_future(endpoints: Endpoints, broker: FakeBroker) -> None:
    seen: queue.Queue[SendResult] = queue.Queue()
    with Producer(endpoints=endpoints) as producer:
        producer.send_async("T", b"x", callback=lambda f: seen.put(f.result()))
        broker.serve(lambda request: schema.ok_reply(request["id"], results=[put_ok(3)]), 1)
        assert seen.get(timeout=WAIT_S).queue_offset == 3


def test_close_fails_what_waits_and_refuses_new_requests(endpoints: Endpoints, broker: FakeBroker) -> None:
    producer = Producer(endpoints=endpoints, timeout_ms=60_000)
    waiting = producer.send_async("T", b"x")
    broker.next_request()
    producer.close(timeout_s=0)  # at once: no flush
    with pytest.raises(BrokerError, match="CLOSED"):
        waiting.result(WAIT_S)
    with pytest.raises(BrokerError, match="CLOSED"):
        producer.send("T", b"y")


def test_a_malformed_send_reply_is_a_reply_error(endpoints: Endpoints, broker: FakeBroker) -> None:
    with Producer(endpoints=endpoints) as producer:
        future = producer.send_async("T", b"x")
        broker.serve(lambda request: schema.ok_reply(request["id"], results=[]), 1)
        with pytest.raises(ReplyError):
            future.result(WAIT_S)


def test_admin_converts_queue_info_and_queries(endpoints: Endpoints, broker: FakeBroker) -> None:
    record = sample_record()
    replies = {
        "queue_info": lambda r: schema.ok_reply(r["id"], queues={"0": [0, 5], "3": [2, 9]}),
        "view_id": lambda r: schema.ok_reply(r["id"], msgs=[record_to_wire(record)]),
        "query_key": lambda r: schema.ok_reply(r["id"], **packed([])),
        "topics": lambda r: schema.ok_reply(r["id"], topics={"T": 4}),
    }
    with Admin(endpoints=endpoints) as admin:
        def ask(op: str, call: Any) -> Any:
            result: queue.Queue[Any] = queue.Queue()
            thread = threading.Thread(target=lambda: result.put(call()))
            thread.start()
            endpoint, identity, request = broker.next_request()
            assert request["op"] == op
            broker.reply(endpoint, identity, replies[op](request))
            thread.join(WAIT_S)
            return result.get_nowait()

        assert ask("queue_info", lambda: admin.queue_info("T")) == {0: (0, 5), 3: (2, 9)}
        assert ask("topics", admin.topics) == {"T": 4}
        assert ask("query_key", lambda: admin.query_by_key("T", "k")) == []
        viewed = ask("view_id", lambda: admin.view_by_id(record.msg_id))
    assert viewed == ReceivedMessage.from_wire(record_to_wire(record))
    assert viewed.born_host == ("10.0.0.1", 4242) and viewed.keys == ("k1", "k2") and viewed.tags == "TagA"
    assert viewed.properties["UNIQ_KEY"] == viewed.uniq_key == "UNIQ"


def test_received_message_refuses_a_malformed_map() -> None:
    wire = record_to_wire(sample_record())
    del wire["store_host"]
    with pytest.raises(ReplyError):
        ReceivedMessage.from_wire(wire)
    with pytest.raises(ReplyError):
        ReceivedMessage.from_wire([1, 2])


def test_consumer_starts_at_the_committed_offset_pulls_in_order_and_commits(endpoints: Endpoints,
                                                                             broker: FakeBroker) -> None:
    records = [sample_record(queue_offset=i) for i in range(5, 8)]
    log: list[dict[str, Any]] = []

    def reader(request: dict[str, Any]) -> dict[str, Any] | None:
        log.append(request)
        op = request["op"]
        if op == "queue_info":
            return schema.ok_reply(request["id"], queues={"0": [0, 8]})
        if op == "fetch_offset":
            return schema.ok_reply(request["id"], offset=5)
        if op == "pull_queues" and request["queues"] == [[0, 5]]:
            return schema.ok_reply(request["id"], queues=[[0, "FOUND", 8, 0, 8, 3]], **packed(records))
        if op in ("pull_queues", "watch_queues"):  # the queue's end, no new queue: parked, longer than the polls wait
            return None
        return schema.ok_reply(request["id"], offset=request["offset"])

    server = threading.Thread(target=broker.serve, args=(reader,), kwargs={"until_op": "commit_offset"},
                              daemon=True)
    server.start()
    consumer = Consumer(endpoints=endpoints, group="g", topic="T", tags="TagA", long_poll_ms=50,
                        auto_commit=False)
    got = consumer.poll(timeout_ms=2000)
    assert [m.queue_offset for m in got] == [5, 6, 7] and consumer.position(0) == 8
    started = time.monotonic()
    assert consumer.poll(timeout_ms=200) == []   # one pull parked; nothing arrives
    assert time.monotonic() - started >= 0.19
    consumer.commit()
    consumer.close()
    server.join(WAIT_S)
    pulls = [r for r in log if r["op"] == "pull_queues"]
    assert [r["queues"] for r in pulls] == [[[0, 5]], [[0, 8]]]  # no spinning on the parked queue
    assert pulls[0]["tags"] == "TagA" and pulls[0]["wait_ms"] == 50 and pulls[0]["group"] == "g"
    assert [r["op"] for r in log][-1] == "commit_offset" and log[-1]["offset"] == 8 and log[-1]["group"] == "g"


def test_consumer_seek_abandons_the_pull_in_flight(endpoints: Endpoints, broker: FakeBroker) -> None:
    def reader(request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] == "queue_info":
            return schema.ok_reply(request["id"], queues={"0": [0, 10]})
        return schema.ok_reply(request["id"], offset=-1)

    server = threading.Thread(target=broker.serve, args=(reader, 2), daemon=True)
    server.start()
    with Consumer(endpoints=endpoints, group="g", topic="T", queues=[0], long_poll_ms=1000,
                  auto_commit=False) as consumer:
        server.join(WAIT_S)
        assert consumer.poll(timeout_ms=50) == []
        endpoint, identity, parked = broker.next_request()
        assert parked["op"] == "pull_queues" and parked["queues"] == [[0, 0]]
        consumer.seek(0, 4)
        record = sample_record(queue_offset=0)
        # the abandoned pull's answer (offset 0) must not be delivered after the seek
        broker.reply(endpoint, identity, schema.ok_reply(parked["id"], queues=[[0, "FOUND", 1, 0, 10, 1]],
                                                         **packed([record])))
        deadline = time.monotonic() + WAIT_S
        assert consumer.poll(timeout_ms=100) == []
        endpoint, identity, fresh = broker.next_request()
        assert fresh["queues"] == [[0, 4]] and time.monotonic() < deadline


def test_outgoing_takes_a_string_as_one_key_and_refuses_other_types() -> None:
    assert Outgoing("T", b"x", keys="k1").to_wire()["keys"] == ["k1"]
    with pytest.raises(TypeError):
        Outgoing("T", b"x", keys=7).to_wire()  # type: ignore[arg-type]


def packed(records: list[Record]) -> dict[str, Any]:
    """A packed pull reply's fields (what a reader answers a ``raw`` pull with)."""
    blobs = [encode_record(topic=r.topic, body=r.body, properties=r.properties, queue_id=r.queue_id,
                           born_host=r.born_host, store_host=r.store_host, queue_offset=r.queue_offset,
                           phys_offset=r.phys_offset) for r in records]
    return stored_parts(b"".join(blobs), [r.queue_offset for r in records], [r.phys_offset for r in records],
                        [len(b) for b in blobs])


def sample_record(queue_offset: int = 3) -> Record:
    return Record(size=200, version=1, body_crc=0, queue_id=0, flag=0, queue_offset=queue_offset,
                  phys_offset=1000 + queue_offset, sys_flag=0, born_ms=1, born_host=Host("10.0.0.1", 4242),
                  store_ms=2, store_host=Host("127.0.0.1", 10911), reconsume_times=0, prepared_tx_offset=0,
                  body=b"hello", topic="T", properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "UNIQ"})
