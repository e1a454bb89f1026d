"""Under ASYNC_FLUSH a round of one send of one message answers its producer before it publishes the
dispatch notice (its producer's round trip waits on that reply alone); a round of several sends, or
of one batch, publishes the notice first, so the consumers of a busy broker do not wait behind the
round's answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.writer.actor import CommitLogWriterActor
from mqstore.actors.writer.encoded import encoding_reply
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.encoded import BatchEncoder, Encoding
from tests.actors.writer.test_limits import QueuedIngress


class Recorded(QueuedIngress):
    """The ingress, and the notices' sockets too: what went out, in order."""

    def __init__(self, frames: list[list[bytes]], events: list[str]) -> None:
        super().__init__(frames)
        self.events = events

    def send_multipart(self, frames: list[Any], flags: int = 0, copy: bool = True) -> None:
        if bytes(frames[0]) in (schema.DISPATCH, schema.WRITTEN, schema.TICK):
            self.events.append(bytes(frames[0]).decode())
        else:
            super().send_multipart(frames, flags, copy)
            self.events.append("reply")


@pytest.fixture
def writer(tmp_path: Path) -> Any:
    geometry = {"commitlog_file_size": 1 << 20, "cq_entries_per_file": 64, "index_slot_count": 16,
                "index_entry_count": 64}
    (tmp_path / "store").mkdir()
    made = CommitLogWriterActor(Runtime("writer", load_config(tmp_path / "store", store={"geometry": geometry}),
                                        zmq.Context()))
    yield made
    made.commitlog.close()
    made.rt.close()


def _request(writer: CommitLogWriterActor, kind: str, i: int, count: int = 1) -> list[bytes]:
    bodies = [b"m%d-%d" % (i, j) for j in range(count)]
    if kind == "send":
        request: requests.Request = requests.Send(tuple(requests.SendMessage("Orders", b) for b in bodies))
    else:
        encoder = BatchEncoder(Encoding.of(encoding_reply(writer.rt.config.store)))
        request = requests.SendEncoded.of(encoder.encode_columns("Orders", bodies))
    return [b"peer%d" % i, *map(bytes, request.frames(i + 1))]


@pytest.mark.parametrize("kind", ["send", "send_encoded"])
def test_a_lone_message_is_answered_before_its_dispatch_and_a_round_of_many_after(writer: CommitLogWriterActor,
                                                                                kind: str) -> None:
    events: list[str] = []
    lone = Recorded([_request(writer, kind, 0)], events)
    writer.serve_round(lone, lone, lone)  # type: ignore[arg-type]
    assert events == ["reply", schema.DISPATCH.decode()] and lone.replies[0]["ok"]
    events.clear()
    many = Recorded([_request(writer, kind, i) for i in (1, 2, 3)], events)
    writer.serve_round(many, many, many)  # type: ignore[arg-type]
    assert events == [schema.DISPATCH.decode(), "reply", "reply", "reply"]
    assert [r["ok"] for r in many.replies] == [True] * 3
    events.clear()
    batch = Recorded([_request(writer, kind, 4, count=100)], events)  # a batch: the full-load rounds' order
    writer.serve_round(batch, batch, batch)  # type: ignore[arg-type]
    assert events == [schema.DISPATCH.decode(), "reply"]


@pytest.mark.parametrize("kind", ["send", "send_encoded"])
@pytest.mark.parametrize("waiting", [1, 3])
def test_a_round_takes_what_waits_without_receiving_past_it(writer: CommitLogWriterActor, kind: str,
                                                            waiting: int) -> None:
    """The round asks whether another request waits rather than receive until zmq.Again, whose
    exception cost more than a one-message append's answer."""
    ingress = Recorded([_request(writer, kind, i) for i in range(waiting)], [])
    writer.serve_round(ingress, ingress, ingress)  # type: ignore[arg-type]
    assert ingress.taken == waiting and len(ingress.replies) == waiting and ingress.again == 0
