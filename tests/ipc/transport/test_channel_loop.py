"""``Channel.request_on_loop``, the exchange made on the event loop's own socket, against a ROUTER the
test drives by hand: the ok and error replies, many requests waiting on one socket answered out of
order, a timeout and the late reply dropped, a broker that is not there, and the close."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
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
    with bound_router("mqstore-loop-") as bound:
        yield bound


def take(sock: zmq.Socket[Any]) -> tuple[bytes, dict[str, Any]]:
    assert sock.poll(DEADLINE_MS)
    identity, frame = sock.recv_multipart()
    return identity, schema.unpack(frame)


def serve(sock: zmq.Socket[Any], count: int) -> threading.Thread:
    """Take ``count`` requests, then answer them in reverse order, each with its own note back."""
    def run() -> None:
        taken = [take(sock) for _ in range(count)]
        for identity, request in reversed(taken):
            if request["op"] == "refuse":
                reply = schema.error_reply(request["id"], "NO_TOPIC", "no such topic")
            else:
                reply = schema.ok_reply(request["id"], echo=request["note"])
            sock.send_multipart([identity, schema.pack(reply)])
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_requests_waiting_on_one_socket_each_get_their_own_reply(router: tuple[str, zmq.Socket[Any]]) -> None:
    endpoint, sock = router

    async def main(channel: Channel) -> list[Any]:
        asks = [channel.request_on_loop("r", "ping", timeout_ms=DEADLINE_MS, note=f"n{i}") for i in range(20)]
        asks.append(channel.request_on_loop("r", "refuse", timeout_ms=DEADLINE_MS, note="x"))
        return await asyncio.gather(*asks, return_exceptions=True)

    with closing(Channel({"r": [endpoint]})) as channel:
        served = serve(sock, 21)
        answers = asyncio.run(main(channel))
        served.join()
        assert [a["echo"] for a in answers[:20]] == [f"n{i}" for i in range(20)]
        assert isinstance(answers[20], BrokerError)
        assert (answers[20].status, answers[20].reason) == ("NO_TOPIC", "no such topic")
        assert channel._on_loop.open_count() == 1  # one socket for every request on the route
        with pytest.raises(ValueError, match="unknown route"):
            asyncio.run(channel.request_on_loop("nowhere", "ping", timeout_ms=DEADLINE_MS))


def test_a_late_reply_to_a_timed_out_request_is_dropped(router: tuple[str, zmq.Socket[Any]]) -> None:
    endpoint, sock = router

    async def main(channel: Channel) -> dict[str, Any]:
        with pytest.raises(BrokerTimeoutError, match="'slow'"):
            await channel.request_on_loop("r", "slow", timeout_ms=50)
        identity, late = take(sock)
        sock.send_multipart([identity, schema.pack(schema.ok_reply(late["id"], echo="late"))])
        served = serve(sock, 1)
        try:
            return await channel.request_on_loop("r", "ping", timeout_ms=DEADLINE_MS, note="own")
        finally:
            served.join()

    with closing(Channel({"r": [endpoint]})) as channel:
        assert asyncio.run(main(channel))["echo"] == "own"


def test_a_broker_that_is_not_there_times_the_request_out(tmp_path: Any) -> None:
    """Nothing bound at the route's endpoint (a dead writer's): the request waits its timeout, no more."""
    async def main(channel: Channel) -> None:
        await channel.request_on_loop("r", "send", timeout_ms=100)

    with closing(Channel({"r": [f"ipc://{tmp_path}/nobody"]})) as channel, pytest.raises(BrokerTimeoutError):
        asyncio.run(main(channel))


def test_closing_fails_the_waiting_requests_and_refuses_later_ones(router: tuple[str, zmq.Socket[Any]]) -> None:
    endpoint, sock = router

    async def main(channel: Channel) -> None:
        waiting = asyncio.create_task(channel.request_on_loop("r", "ping", timeout_ms=DEADLINE_MS, note="n"))
        await asyncio.sleep(0)  # the task's first step: the request goes out
        take(sock)  # sent, never answered
        channel.close_loop_sockets()
        with pytest.raises(BrokerError) as failed:
            await waiting
        assert failed.value.status == CLOSED
        with pytest.raises(BrokerError) as refused:
            await channel.request_on_loop("r", "ping", timeout_ms=DEADLINE_MS, note="n")
        assert refused.value.status == CLOSED

    with closing(Channel({"r": [endpoint]})) as channel:
        asyncio.run(main(channel))
        assert channel._on_loop.open_count() == 0
