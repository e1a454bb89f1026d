"""The Channel's multipart messages against a ROUTER in a thread: a request's parts arrive after its
map as frames of their own (the large one sent without a copy), a reply's parts come back in its
``parts`` field, and a reply whose map miscounts its parts is dropped like any undecodable reply."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import pytest

from mqstore.ipc.transport.channel import BrokerTimeoutError, Channel
from mqstore.ipc.transport.sockets import ZERO_COPY_MIN_BYTES
from mqstore.ipc.wire import schema
from tests.ipc.routers import bound_router


@pytest.fixture
def router() -> Iterator[tuple[str, Callable[[Callable[[list[bytes]], list[bytes]]], None]]]:
    """An endpoint, and ``serve(answer)``: the next request's frames (identity first) handed to
    ``answer``, whose frames go back."""
    with bound_router("mqstore-parts-") as (endpoint, sock):
        def serve(answer: Callable[[list[bytes]], list[bytes]]) -> None:
            def run() -> None:
                assert sock.poll(5000)
                frames = sock.recv_multipart()
                sock.send_multipart([frames[0], *answer(frames[1:])])
            thread = threading.Thread(target=run)
            thread.start()
            thread.join(10)
        yield endpoint, serve


def test_parts_go_out_as_frames_after_the_map_and_come_back_in_the_reply(
        router: tuple[str, Callable[[Callable[[list[bytes]], list[bytes]]], None]]) -> None:
    endpoint, serve = router
    big, small = os.urandom(ZERO_COPY_MIN_BYTES * 3), b"tail"
    got: list[list[bytes]] = []

    def echo(frames: list[bytes]) -> list[bytes]:
        got.append(frames)
        request = schema.unpack_message(frames[0], frames[1:])
        return schema.pack_message(schema.ok_reply(request["id"], op=request["op"]), frames[:0:-1])
    channel = Channel({"r": [endpoint]})
    try:
        future = channel.call("r", "echo", timeout_ms=5000, parts=(big, small), note="n")
        serve(echo)
        reply = future.result(5)
    finally:
        channel.close()
    header, *parts = got[0]
    assert schema.unpack(header)["parts"] == 2 and schema.unpack(header)["note"] == "n"
    assert parts == [big, small]
    assert reply["op"] == "echo" and [bytes(p) for p in reply["parts"]] == [small, big]
    assert all(isinstance(p, memoryview) for p in reply["parts"])


def test_a_reply_that_miscounts_its_parts_is_dropped(
        router: tuple[str, Callable[[Callable[[list[bytes]], list[bytes]]], None]]) -> None:
    endpoint, serve = router
    channel = Channel({"r": [endpoint]})
    try:
        future = channel.call("r", "ping", timeout_ms=300)
        serve(lambda frames: [schema.pack({**schema.ok_reply(schema.unpack(frames[0])["id"]), "parts": 2}), b"x"])
        with pytest.raises(BrokerTimeoutError):
            future.result(5)
        with pytest.raises(ValueError, match="at most"):
            channel.call("r", "ping", timeout_ms=300, parts=[b"x"] * (schema.MAX_PARTS + 1))
    finally:
        channel.close()
