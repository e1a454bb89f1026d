"""What one client can make the commitlog writer hold: found by scripts/survival/hostile, each test named
after the bug it pins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.writer.actor import CommitLogWriterActor
from mqstore.ipc.wire import schema
from tests.actors.writer.sent_frames import Published, SentFrames


class QueuedIngress(SentFrames):
    """An ingress ROUTER with frames already waiting, as ZeroMQ's pipe holds them after a flood."""

    def __init__(self, frames: list[list[bytes]]) -> None:
        self.waiting = list(frames)
        self.taken = 0
        self.again = 0  # receives that found nothing
        self.replies: list[dict[str, Any]] = []
        self.current: list[bytes] = []  # the rest of the message being received, frame by frame

    def recv(self, flags: int = 0, copy: bool = True) -> bytes | zmq.Frame:
        if not self.current:
            if not self.waiting:
                self.again += 1
                raise zmq.Again()
            self.taken += 1
            self.current = list(self.waiting.pop(0))
        frame = self.current.pop(0)
        return frame if copy else zmq.Frame(frame)

    def getsockopt(self, option: int) -> int:
        if option == zmq.EVENTS:  # a message waits
            return int(zmq.POLLIN) if self.waiting or self.current else 0
        assert option == zmq.RCVMORE
        return int(bool(self.current))

    def send_multipart(self, frames: list[bytes], flags: int = 0, copy: bool = True) -> None:
        if len(frames) == 2:
            self.replies.append(schema.unpack(frames[1]))


def _writer(tmp_path: Path, **broker: Any) -> CommitLogWriterActor:
    geometry = {"commitlog_file_size": 4 << 20, "cq_entries_per_file": 64, "index_slot_count": 16,
                "index_entry_count": 64}
    config = load_config(tmp_path / "store", broker=broker, store={"max_body_bytes": 64 * 1024, "geometry": geometry})
    (tmp_path / "store").mkdir()
    return CommitLogWriterActor(Runtime("writer", config, zmq.Context()))


def test_writer_batch_is_bounded_by_bytes_not_only_by_message_count(tmp_path: Path) -> None:
    """A flood of big frames (bodies past the store's limit, refused one by one) used to be drained
    into one batch whole: every frame ZeroMQ had queued, held at once (4 GiB for 60 frames of
    64 MiB). A batch now takes about one max_request_bytes of frames; the rest wait for the next."""
    writer = _writer(tmp_path, max_request_bytes=1 << 20)
    frame = schema.pack(schema.request("send", 1, msgs=[{"topic": "Flood", "body": bytes(600 * 1024)}]))
    ingress = QueuedIngress([[b"peer", frame]] * 10)
    pub = Published()
    try:
        writer.serve_round(ingress, pub, pub)  # type: ignore[arg-type]
        assert ingress.taken == 2  # 600 KiB, then 1.2 MiB: past one request's worth, the batch closes
        assert [r["results"][0]["status"] for r in ingress.replies] == ["MESSAGE_ILLEGAL"] * 2
        while ingress.waiting:
            writer.serve_round(ingress, pub, pub)  # type: ignore[arg-type]
        assert len(ingress.replies) == 10
    finally:
        writer.commitlog.close()
        writer.rt.close()
