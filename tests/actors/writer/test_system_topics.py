"""System topics on the writer's ingress (mqstore.engine.put.system_topics): a client that names one, by
send, encoded send, create or delete, is refused with RocketMQ's NO_PERMISSION answer and nothing is
written; the broker's own actors, on ``own_ingress``, still write them, and their answers go back on
their own socket."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mqstore.actors.remoting import front
from mqstore.actors.writer.actor import CommitLogWriterActor
from mqstore.actors.writer.encoded import encoding_reply
from mqstore.actors.writer.ingress import Answer
from mqstore.actors.writer.sends import MessageSend
from mqstore.engine.log.record import SCHEDULE_TOPIC
from mqstore.engine.put.system_topics import NOT_ALLOWED_SEND_TOPICS
from mqstore.engine.put.transactions import CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC
from mqstore.engine.reclaim.move import MOVED_TOPIC
from mqstore.engine.timer.put_rule import TIMER_TOPIC
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.encoded import BatchEncoder, Encoding
from mqstore.ipc.wire.requests import Request, SendMessage
from tests.actors.writer.sent_frames import Published
from tests.actors.writer.test_ingress import parse, writer
from tests.actors.writer.test_limits import QueuedIngress

__all__ = ["writer"]  # the fixture, shared with the ingress tests

SYSTEM = [SCHEDULE_TOPIC, HALF_TOPIC, OP_TOPIC, CHECK_MAX_TOPIC, TIMER_TOPIC, MOVED_TOPIC, "SELF_TEST_TOPIC",
          "OFFSET_MOVED_EVENT", "rmq_sys_anything", "RMQ_SYS_TRANS_OTHER"]


def _requests(topic: str, writer: CommitLogWriterActor) -> list[Request]:
    encoder = BatchEncoder(Encoding.of(encoding_reply(writer.rt.config.store)))
    return [requests.Send((SendMessage("Open", b"fine"), SendMessage(topic, b"forged"))),
            # a raw client's: the library's encoder refuses the schedule topic itself
            replace(requests.SendEncoded.of(encoder.encode_columns("Open", [b"forged"])), topics=(topic,)),
            requests.CreateTopic(topic, 1), requests.DeleteTopic(topic)]


@pytest.mark.parametrize("topic", SYSTEM)
def test_a_client_naming_a_system_topic_is_refused_no_permission(writer: CommitLogWriterActor, topic: str) -> None:
    table = writer.state.queues.table
    before = (table.get(topic), writer.commitlog.max_offset)
    for request in _requests(topic, writer):
        parsed = parse(writer, request, request_id=9)
        assert isinstance(parsed, Answer), (request, parsed)
        reply = parsed.reply
        assert (reply["ok"], reply["id"], reply["status"]) == (False, 9, schema.NO_PERMISSION)
        assert reply["reason"] == f"Sending message to topic[{topic}] is forbidden."
        assert parsed.notice is None
    assert (table.get(topic), writer.commitlog.max_offset) == before


@pytest.mark.parametrize("topic", ["RMQ_SYS_TRACE_TOPIC", "%RETRY%G", "%DLQ%G", "Orders", "rmq_sysx"])
def test_other_topics_stay_open(writer: CommitLogWriterActor, topic: str) -> None:
    assert topic not in NOT_ALLOWED_SEND_TOPICS
    assert isinstance(parse(writer, requests.Send((SendMessage(topic, b"x"),))), MessageSend)


def test_the_remoting_front_asks_the_same_rule() -> None:
    assert front.NOT_ALLOWED_SEND_TOPICS is NOT_ALLOWED_SEND_TOPICS


def test_the_broker_actors_own_ingress_writes_system_topics_and_is_answered_there(
        writer: CommitLogWriterActor) -> None:
    own = QueuedIngress([[b"\x00\x01\x02\x03\x04", *map(bytes, requests.Send(
        (SendMessage(OP_TOPIC, b"op", queue=0),)).frames(1))]])
    clients = QueuedIngress([[b"\x00\x01\x02\x03\x04", *map(bytes, requests.Send(
        (SendMessage(OP_TOPIC, b"forged", queue=0),)).frames(2))]])
    pub = Published()
    before = writer.commitlog.max_offset
    writer.serve_round(clients, pub, pub, own, own=True)  # type: ignore[arg-type]
    assert [r["ok"] for r in own.replies] == [True] and not clients.replies
    assert own.replies[0]["results"][0]["status"] == "PUT_OK" and writer.commitlog.max_offset > before
    written = writer.commitlog.max_offset
    writer.serve_round(clients, pub, pub, own)  # type: ignore[arg-type]
    assert [(r["ok"], r["status"]) for r in clients.replies] == [(False, schema.NO_PERMISSION)]
    assert len(own.replies) == 1 and writer.commitlog.max_offset == written
