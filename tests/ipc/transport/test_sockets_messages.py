"""A message's frames over real sockets: ``recv_message`` gives its head frames as bytes and every frame
after them, in order, however many follow (each part saying whether another does); ``send_notice``
publishes a notice's two frames as a subscriber decodes them; ``send_frames`` sends a message a
frame at a time, its big frames without a copy, as ``send_multipart`` would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import zmq

from mqstore.ipc.transport.sockets import ZERO_COPY_MIN_BYTES, has_message, recv_message, send_frames, send_notice
from mqstore.ipc.wire.notices import Arrived, Tick


@pytest.fixture
def pair() -> Iterator[tuple[zmq.Socket[Any], zmq.Socket[Any]]]:
    ctx: zmq.Context[Any] = zmq.Context()
    out, into = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    out.bind("inproc://messages")
    into.connect("inproc://messages")
    yield out, into
    ctx.destroy(linger=0)


@pytest.mark.parametrize("parts", [0, 1, 3, 16])
@pytest.mark.parametrize("head", [1, 2])
def test_every_frame_after_the_head_is_received_in_order(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]],
                                                         head: int, parts: int) -> None:
    out, into = pair
    frames = [f"head{i}".encode() for i in range(head)] + [bytes([i]) * (i + 1) for i in range(parts)]
    for _ in range(2):  # back to back: the first message's last part ends it, the second comes whole
        out.send_multipart(frames)
    for _ in range(2):
        got_head, got_parts = recv_message(into, head=head)
        assert got_head == frames[:head]
        assert [bytes(p) for p in got_parts] == frames[head:]
    assert not has_message(into)


def test_a_message_shorter_than_its_head_is_received_whole(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    out, into = pair
    out.send(b"alone")
    assert recv_message(into, zmq.NOBLOCK, head=2) == ([b"alone"], [])


def test_a_published_notice_is_its_topic_and_its_map() -> None:
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
        pub.bind("inproc://notices")
        sub.connect("inproc://notices")
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        arrived = Arrived((("T", 1, 7),), 700, 12, 3, 4)
        while not sub.poll(10):  # a subscription takes effect some time after the connect
            send_notice(pub, Tick(1))
        while has_message(sub):
            sub.recv_multipart()
        send_notice(pub, arrived)
        assert sub.poll(5000)
        topic, frame = sub.recv_multipart()
        assert topic == arrived.TOPIC and Arrived.decode(frame) == arrived
    finally:
        ctx.destroy(linger=0)


def test_frames_sent_one_by_one_arrive_as_one_message(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    out, into = pair
    out.copy_threshold = ZERO_COPY_MIN_BYTES
    column = np.arange(ZERO_COPY_MIN_BYTES // 8 + 1, dtype="<i8")  # past the threshold: sent without a copy
    frames: list[bytes | memoryview] = [b"topic", b"map", column.view(np.uint8).data, b"", np.arange(3).data.cast("B")]
    send_frames(out, frames)
    send_frames(out, [b"alone"], int(zmq.NOBLOCK))
    assert into.recv_multipart() == [bytes(f) for f in frames]
    assert into.recv_multipart() == [b"alone"] and not has_message(into)
