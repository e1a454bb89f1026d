"""A request over the broker's ``[broker] max_request_bytes`` through a real broker: the Producer
(which knows the default, and the writer's own limit once it asked the writer's encoding) refuses it
before it is sent, at once, naming the limit (its writer's socket would drop it unread
and the send would wait out its timeout); a raw client that sends one anyway has its connection
closed, which the writer logs with the limit, and the broker goes on serving."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from mqstore.ipc.client.api import Producer
from mqstore.ipc.transport.channel import REQUEST_TOO_LARGE, BrokerError
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests import Send, SendMessage
from tests.integration.broker import Broker, wait_for

LIMIT = 1 << 20
TIMEOUT_MS = 60_000  # a send that waited for its timeout would fail the test by hanging, not by time


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("limits"), broker_extra=f"max_request_bytes = {LIMIT}") as running:
        yield running


def test_a_send_over_the_request_limit_is_refused_before_it_is_sent(broker: Broker) -> None:
    with Producer(endpoints=broker.endpoints(), timeout_ms=TIMEOUT_MS, retries=0) as producer:
        producer.send_encoded_columns("Big", [b"learns"])  # the writer's encoding tells its limit
        with pytest.raises(BrokerError) as refused:
            producer.send("Big", b"x" * (LIMIT + 1))
        assert refused.value.status == REQUEST_TOO_LARGE and f"{LIMIT}-byte limit" in refused.value.reason
        assert producer.send("Big", b"fits").status == "PUT_OK"


def test_a_first_send_over_a_lowered_limit_is_refused_before_it_is_sent(broker: Broker) -> None:
    """A fresh Producer's first request (no encoded send before it) learns the broker's lowered limit
    before a big request goes out, instead of sending it into the socket that drops it."""
    with Producer(endpoints=broker.endpoints(), timeout_ms=TIMEOUT_MS, retries=0) as producer:
        with pytest.raises(BrokerError) as refused:
            producer.send("Big", b"x" * (LIMIT + 1))
        assert refused.value.status == REQUEST_TOO_LARGE and f"{LIMIT}-byte limit" in refused.value.reason
        assert producer.send("Big", b"fits").status == "PUT_OK"


def test_a_raw_request_over_the_limit_is_logged_by_the_writer(broker: Broker, tmp_path: Path) -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(broker.endpoints().ingress)
        sock.send(schema.pack(Send((SendMessage("Big", b"x" * (LIMIT + 1)),)).encode(1)))
        wait_for(lambda: f"over {LIMIT} bytes, which is dropped unread" in broker.logs(), timeout_s=30,
                 what="the writer's log of the closed connection")
    finally:
        ctx.destroy(linger=0)
    with Producer(endpoints=broker.endpoints(), timeout_ms=TIMEOUT_MS) as producer:
        assert producer.send("Big", b"after").status == "PUT_OK"
