"""The writer's ingress and its send round on typed requests (mqstore.actors.writer.ingress), over a
writer built on a temp store with no socket and no other process: each op decoded once into its
class, refusals naming their field, topics made on their first send, queue selection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.writer.actor import CommitLogWriterActor
from mqstore.actors.writer.encoded import EncodedSend, encoding_reply
from mqstore.actors.writer.ingress import Answer
from mqstore.actors.writer.sends import MessageSend
from mqstore.engine.log.message import PutStatus
from mqstore.engine.put.queue_selector import shard_hash, shard_queue
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.encoded import BatchEncoder, Encoding
from mqstore.ipc.wire.messages import SendResult
from mqstore.ipc.wire.notices import TopicDeleted
from mqstore.ipc.wire.requests import Request, SendMessage
from tests.actors.writer.sent_frames import Published
from tests.actors.writer.test_limits import QueuedIngress

DEFAULT_QUEUES = 4


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[CommitLogWriterActor]:
    geometry = {"commitlog_file_size": 1 << 20, "cq_entries_per_file": 64, "index_slot_count": 16,
                "index_entry_count": 64}
    config = load_config(tmp_path / "store", broker={"default_queues": DEFAULT_QUEUES, "max_queues": 16,
                                                      "max_batch_messages": 8},
                         store={"geometry": geometry})
    (tmp_path / "store").mkdir()
    actor = CommitLogWriterActor(Runtime("writer", config, zmq.Context()))
    try:
        yield actor
    finally:
        actor.commitlog.close()
        actor.rt.close()


def parse(writer: CommitLogWriterActor, request: Request | dict[str, Any], request_id: Any = 1
          ) -> MessageSend | EncodedSend | Answer:
    frames = request.frames(request_id) if isinstance(request, Request) else [schema.pack(request)]
    return writer.ingress.parse([b"peer", bytes(frames[0])], [memoryview(bytes(f)) for f in frames[1:]])


def answer(writer: CommitLogWriterActor, request: Request | dict[str, Any]) -> dict[str, Any]:
    parsed = parse(writer, request)
    assert isinstance(parsed, Answer), parsed
    return parsed.reply


def send(*msgs: SendMessage) -> requests.Send:
    return requests.Send(msgs)


def test_a_send_becomes_its_messages_and_queues(writer: CommitLogWriterActor) -> None:
    parsed = parse(writer, send(SendMessage("Orders", b"a", keys=("k",), props={"p": "v"}, tags="t", queue=2),
                                SendMessage("Orders", b"b", born_host=("10.0.0.7", 99), flag=5)), request_id=7)
    assert isinstance(parsed, MessageSend) and parsed.request_id == 7
    first, second = parsed.messages
    assert (first.topic, first.body, first.keys, first.tags, first.properties) == ("Orders", b"a", ("k",), "t",
                                                                                    {"p": "v"})
    assert (second.flag, second.born_host.ip if second.born_host else None) == (5, "10.0.0.7")
    assert parsed.queue_ids[0] == 2 and parsed.refused == [None, None]


def test_a_topic_is_made_on_its_first_send_with_the_default_queues(writer: CommitLogWriterActor) -> None:
    table = writer.state.queues.table
    assert table.get("Fresh") is None
    parse(writer, send(SendMessage("Fresh", b"x")))
    topic = table.get("Fresh")
    assert topic is not None and topic.queue_count == DEFAULT_QUEUES


def test_queues_explicit_by_shard_and_round_robin(writer: CommitLogWriterActor) -> None:
    parsed = parse(writer, send(SendMessage("Q", b"x", queue=3), SendMessage("Q", b"x", shard="user-9"),
                                *[SendMessage("Q", b"x")] * DEFAULT_QUEUES))
    assert isinstance(parsed, MessageSend)
    assert parsed.queue_ids[:2] == [3, shard_queue(shard_hash("user-9"), DEFAULT_QUEUES)]
    assert sorted(parsed.queue_ids[2:]) == list(range(DEFAULT_QUEUES))  # one turn round every queue


def test_a_queue_out_of_range_is_refused_alone(writer: CommitLogWriterActor) -> None:
    parsed = parse(writer, send(SendMessage("Q", b"x", queue=DEFAULT_QUEUES), SendMessage("Q", b"y")))
    assert isinstance(parsed, MessageSend)
    refused, kept = parsed.refused
    assert refused is not None and refused.status is PutStatus.MESSAGE_ILLEGAL and "out of range" in refused.reason
    assert kept is None and [m.body for m in parsed.messages] == [b"y"]


def test_a_send_encoded_keeps_its_decoded_request_for_the_round(writer: CommitLogWriterActor) -> None:
    encoder = BatchEncoder(Encoding.of(encoding_reply(writer.rt.config.store)))
    request = requests.SendEncoded.of(encoder.encode_columns("Enc", [b"a", b"b"], tags="t"))
    parsed = parse(writer, request, request_id=3)
    assert isinstance(parsed, EncodedSend) and parsed.request == request and parsed.request_id == 3


def test_the_answered_ops(writer: CommitLogWriterActor, tmp_path: Path) -> None:
    assert answer(writer, requests.Encoding())["max_body_bytes"] == writer.rt.config.store.max_body_bytes
    assert answer(writer, requests.Ping())["written"] == writer.commitlog.max_offset
    made = answer(writer, requests.CreateTopic("Made", 6))
    assert (made["ok"], made["queues"]) == (True, 6)
    assert answer(writer, requests.CreateTopic("Default"))["queues"] == DEFAULT_QUEUES
    assert answer(writer, requests.Topics())["topics"]["Made"] == 6
    deleted = parse(writer, requests.DeleteTopic("Made"))
    assert isinstance(deleted, Answer) and deleted.reply["existed"] is True
    assert deleted.notice == TopicDeleted("Made", writer.commitlog.max_offset)
    illegal = answer(writer, requests.DeleteTopic("no/such"))
    assert (illegal["ok"], illegal["status"]) == (False, PutStatus.MESSAGE_ILLEGAL.value)


@pytest.mark.parametrize(("message", "status", "named"), [
    ({"op": "create_topic", "topic": "T", "queues": 17}, schema.BAD_REQUEST, "'queues' = 17 is above 16"),
    ({"op": "send", "msgs": [{"topic": "T", "body": b"x"}] * 9}, schema.BAD_REQUEST, "1 to 8 messages"),
    ({"op": "send", "msgs": [{"topic": "T", "body": "text"}]}, schema.BAD_REQUEST, "field 'body' must be bytes"),
    ({"op": "send", "msgs": [{"topic": "T", "body": b"x", "sys_flag": 0x100}]}, schema.BAD_REQUEST, "sys_flag"),
    ({"op": "pull", "topic": "T", "queue": 0, "offset": 0}, schema.UNKNOWN_OP, "the writer does not serve 'pull'"),
    ({"op": 7}, schema.BAD_REQUEST, "field 'op' must be str"),
])
def test_refusals_name_the_field(writer: CommitLogWriterActor, message: dict[str, Any], status: str,
                                 named: str) -> None:
    reply = answer(writer, {"v": 1, "id": 5, **message})
    assert (reply["ok"], reply["id"], reply["status"]) == (False, 5, status)
    assert named in reply["reason"]


def test_a_round_appends_both_kinds_of_send_and_answers_each(writer: CommitLogWriterActor) -> None:
    encoder = BatchEncoder(Encoding.of(encoding_reply(writer.rt.config.store)))
    encoded = requests.SendEncoded.of(encoder.encode_columns("Round", [b"e1", b"e2"]))
    frames = [[b"p1", *map(bytes, send(SendMessage("Round", b"m", queue=1)).frames(1))],
              [b"p2", *map(bytes, encoded.frames(2))],
              [b"p3", *map(bytes, requests.Ping().frames(3))]]
    ingress = QueuedIngress(frames)
    pub = Published()
    published = pub.sent
    before = writer.commitlog.max_offset
    writer.serve_round(ingress, pub, pub)  # type: ignore[arg-type]
    replies = {r["id"]: r for r in ingress.replies}
    assert set(replies) == {1, 2, 3} and all(r["ok"] for r in replies.values())
    (result,) = [SendResult.from_wire(r) for r in replies[1]["results"]]
    assert (result.queue_id, result.queue_offset, result.phys_offset) == (1, 0, before)
    assert len(replies[2]["results"]) > 0 and replies[2]["status"] == "PUT_OK"
    assert writer.commitlog.max_offset > before and published  # appended, and the builders told
