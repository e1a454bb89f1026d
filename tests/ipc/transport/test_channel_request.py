"""``Channel.request``, the exchange made on the calling thread's own socket, against a ROUTER the
test drives by hand: the ok reply and an error reply as ``call`` gives them, a timeout, a late reply
to a timed-out request dropped, one socket per thread, and every one closed with the channel."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import pytest
import zmq

from mqstore.ipc.transport.channel import CLOSED, BrokerError, BrokerTimeoutError, Channel
from mqstore.ipc.wire import schema
from tests.ipc.routers import bound_router

DEADLINE_MS = 5000


@pytest.fixture
def router() -> Iterator[tuple[str, zmq.Socket[Any]]]:
    with bound_router("mqstore-request-") as bound:
        yield bound


def take(sock: zmq.Socket[Any]) -> tuple[bytes, dict[str, Any]]:
    """The next request: its sender's identity and its map."""
    assert sock.poll(DEADLINE_MS)
    identity, frame = sock.recv_multipart()
    return identity, schema.unpack(frame)


def answer(sock: zmq.Socket[Any], reply: Callable[[dict[str, Any]], dict[str, Any]]) -> threading.Thread:
    """Serve the next request in a thread with ``reply(request)``."""
    def run() -> None:
        identity, request = take(sock)
        sock.send_multipart([identity, schema.pack(reply(request))])
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_ok_reply_and_an_error_reply_as_call_gives_them(router: tuple[str, zmq.Socket[Any]]) -> None:
    endpoint, sock = router
    with closing(Channel({"r": [endpoint]})) as channel:
        served = answer(sock, lambda r: schema.ok_reply(r["id"], echo=r["note"], op=r["op"]))
        assert channel.request("r", "ping", timeout_ms=DEADLINE_MS, note="n")["echo"] == "n"
        served.join()
        served = answer(sock, lambda r: schema.error_reply(r["id"], "NO_TOPIC", "no such topic"))
        with pytest.raises(BrokerError) as refused:
            channel.request("r", "queue_info", timeout_ms=DEADLINE_MS, topic="T")
        served.join()
        assert (refused.value.status, refused.value.reason) == ("NO_TOPIC", "no such topic")
        with pytest.raises(ValueError, match="unknown route"):
            channel.request("nowhere", "ping", timeout_ms=DEADLINE_MS)


def test_a_late_reply_to_a_timed_out_request_is_dropped(router: tuple[str, zmq.Socket[Any]]) -> None:
    endpoint, sock = router
    with closing(Channel({"r": [endpoint]})) as channel:
        with pytest.raises(BrokerTimeoutError, match="'slow'"):
            channel.request("r", "slow", timeout_ms=50)
        identity, late = take(sock)
        sock.send_multipart([identity, schema.pack(schema.ok_reply(late["id"], which="late"))])
        served = answer(sock, lambda r: schema.ok_reply(r["id"], which="own"))
        assert channel.request("r", "ping", timeout_ms=DEADLINE_MS)["which"] == "own"
        served.join()


def test_each_thread_has_its_own_socket_and_the_channel_closes_them_all(
        router: tuple[str, zmq.Socket[Any]]) -> None:
    endpoint, sock = router
    channel = Channel({"r": [endpoint]})
    try:
        senders: list[bytes] = []

        def serve_one() -> None:
            identity, request = take(sock)
            senders.append(identity)
            sock.send_multipart([identity, schema.pack(schema.ok_reply(request["id"]))])

        def call_from_a_thread() -> None:
            thread = threading.Thread(target=channel.request, args=("r", "ping"), kwargs={"timeout_ms": DEADLINE_MS})
            thread.start()
            serve_one()
            thread.join()

        call_from_a_thread()
        assert channel._callers.open_count() == 1  # the ended thread's socket, until another thread comes
        call_from_a_thread()
        assert channel._callers.open_count() == 1  # the first thread's was closed when the second came
        served = threading.Thread(target=serve_one)
        served.start()
        channel.request("r", "ping", timeout_ms=DEADLINE_MS)
        served.join()
        assert len(set(senders)) == 3  # a socket, and so an identity, per thread
        assert channel._callers.open_count() == 1  # this thread's; the second's went as this one came
    finally:
        channel.close()
    assert channel._callers.open_count() == 0
    with pytest.raises(BrokerError) as closed:
        channel.request("r", "ping", timeout_ms=DEADLINE_MS)
    assert closed.value.status == CLOSED

