"""The Producer's blocking sends against a fake broker: made on the calling thread's own socket, not
handed to the client's I/O thread, with the same results, retries, timeouts and refusals as the
futures give."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mqstore.ipc.client.api import BrokerError, BrokerTimeoutError, Outgoing, Producer, ReplyError, SendResult
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import schema
from tests.ipc.client.test_client_schema import WAIT_S, FakeBroker, put_ok
from tests.ipc.client.test_client_schema import broker as broker  # a fixture
from tests.ipc.client.test_client_schema import endpoints as endpoints  # a fixture

BUSY = {"status": "SERVICE_NOT_AVAILABLE", "reason": "disk full"}


def in_a_thread(call: Callable[[], Any]) -> queue.Queue[Any]:
    """Run a blocking call while the test plays the broker; its result (or exception) lands in the queue."""
    out: queue.Queue[Any] = queue.Queue()

    def run() -> None:
        try:
            out.put(call())
        except BaseException as exc:
            out.put(exc)
    threading.Thread(target=run, daemon=True).start()
    return out


@pytest.fixture
def producer(endpoints: Endpoints) -> Iterator[Producer]:
    with Producer(endpoints=endpoints, retries=2, retry_backoff_ms=10, timeout_ms=2_000) as made:
        yield made


def test_a_blocking_send_goes_out_on_the_calling_threads_socket_not_the_io_threads(
        producer: Producer, broker: FakeBroker) -> None:
    future = producer.send_async("T", b"async")
    endpoint, io_identity, request = broker.next_request()
    broker.reply(endpoint, io_identity, schema.ok_reply(request["id"], results=[put_ok(1)]))
    assert future.result(WAIT_S).queue_offset == 1
    sent = in_a_thread(lambda: producer.send("T", b"blocking"))
    endpoint, identity, request = broker.next_request()
    assert identity != io_identity  # another socket: the caller's own
    broker.reply(endpoint, identity, schema.ok_reply(request["id"], results=[put_ok(2)]))
    assert sent.get(timeout=WAIT_S) == SendResult.from_wire(put_ok(2))
    assert producer._channel._callers.open_count() == 1


def test_send_is_one_message_with_its_fields(producer: Producer, broker: FakeBroker) -> None:
    sent = in_a_thread(lambda: producer.send("Orders", b"\x00body", tags="paid", keys=["k1"], properties={"c": "r"},
                                             queue_id=1))
    endpoint, identity, request = broker.next_request()
    assert request["op"] == "send" and request["msgs"] == [
        {"topic": "Orders", "body": b"\x00body", "tags": "paid", "keys": ["k1"], "props": {"c": "r"}, "queue": 1,
         "flag": 0, "reconsume_times": 0}]
    broker.reply(endpoint, identity, schema.ok_reply(request["id"], results=[put_ok(7)]))
    assert sent.get(timeout=WAIT_S).queue_offset == 7


def test_service_not_available_is_retried_for_the_refused_messages_only(producer: Producer,
                                                                       broker: FakeBroker) -> None:
    sent = in_a_thread(lambda: producer.send_batch([Outgoing("T", b"a"), Outgoing("T", b"b"), Outgoing("T", b"c")]))
    endpoint, identity, request = broker.next_request()
    broker.reply(endpoint, identity, schema.ok_reply(request["id"], results=[put_ok(0), BUSY, BUSY]))
    endpoint, identity, retry = broker.next_request()
    assert [m["body"] for m in retry["msgs"]] == [b"b", b"c"] and retry["id"] != request["id"]
    broker.reply(endpoint, identity, schema.ok_reply(retry["id"], results=[put_ok(1), BUSY]))
    endpoint, identity, last = broker.next_request()
    assert [m["body"] for m in last["msgs"]] == [b"c"]
    broker.reply(endpoint, identity, schema.ok_reply(last["id"], results=[put_ok(2)]))
    assert [r.queue_offset for r in sent.get(timeout=WAIT_S)] == [0, 1, 2]


def test_service_not_available_is_returned_once_retries_run_out(producer: Producer,
                                                                 broker: FakeBroker) -> None:
    sent = in_a_thread(lambda: producer.send("T", b"x"))
    broker.serve(lambda request: schema.ok_reply(request["id"], results=[BUSY]), 3)  # the send and two retries
    result = sent.get(timeout=WAIT_S)
    assert not result.ok and result.status == "SERVICE_NOT_AVAILABLE" and result.reason == "disk full"
    assert broker.received.empty()


def test_a_timeout_raises_and_the_late_reply_is_ignored_by_the_next_send(endpoints: Endpoints,
                                                                        broker: FakeBroker) -> None:
    with Producer(endpoints=endpoints, timeout_ms=200) as producer:
        with pytest.raises(BrokerTimeoutError):
            producer.send("T", b"late")
        endpoint, identity, stale = broker.next_request()

        def answer_late_then_fresh() -> None:
            _, fresh_identity, request = broker.next_request()
            assert fresh_identity == identity  # this thread's socket again
            broker.reply(endpoint, identity, schema.ok_reply(stale["id"], results=[put_ok(1)]))  # too late
            broker.reply(endpoint, identity, schema.ok_reply(request["id"], results=[put_ok(2)]))
        answered = in_a_thread(answer_late_then_fresh)
        assert producer.send("T", b"fresh").queue_offset == 2
        assert answered.get(timeout=WAIT_S) is None


def test_a_refusal_raises_broker_error_and_a_malformed_reply_a_reply_error(producer: Producer,
                                                                         broker: FakeBroker) -> None:
    sent = in_a_thread(lambda: producer.send("T", b"x"))
    endpoint, identity, request = broker.next_request()
    broker.reply(endpoint, identity, schema.error_reply(request["id"], schema.BAD_REQUEST, "no such thing"))
    refused = sent.get(timeout=WAIT_S)
    assert isinstance(refused, BrokerError) and refused.status == schema.BAD_REQUEST
    sent = in_a_thread(lambda: producer.send("T", b"x"))
    broker.serve(lambda request: schema.ok_reply(request["id"], results=[]), 1)
    assert isinstance(sent.get(timeout=WAIT_S), ReplyError)


def test_a_blocking_send_from_a_send_callback_is_answered(producer: Producer,
                                                          broker: FakeBroker) -> None:
    """A callback runs on the I/O thread: a send made there waits on its own socket, not on that thread."""
    seen: queue.Queue[Any] = queue.Queue()
    producer.send_async("T", b"first", callback=lambda f: seen.put(producer.send("T", b"from the callback")))
    broker.serve(lambda request: schema.ok_reply(request["id"], results=[put_ok(len(request["msgs"][0]["body"]))]),
                 2)
    assert seen.get(timeout=WAIT_S).queue_offset == len(b"from the callback")


def test_a_closed_producer_refuses_a_blocking_send(endpoints: Endpoints, broker: FakeBroker) -> None:
    producer = Producer(endpoints=endpoints)
    producer.close()
    with pytest.raises(BrokerError, match="CLOSED"):
        producer.send("T", b"y")
    with pytest.raises(BrokerError, match="CLOSED"):
        producer.send_batch([Outgoing("T", b"y")])
