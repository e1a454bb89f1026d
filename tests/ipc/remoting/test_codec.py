"""RocketMQ remoting frames: the C++ client's own bytes, both header types, batch bodies, and every
malformed frame a FrameError (never another exception)."""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.actors.remoting.clients import ClientBodyError, ConsumerTable, QueueLocks
from mqstore.ipc.remoting import codec as rm

# a SEND_MESSAGE header as the C++ 1.2.3 client writes it (jsoncpp FastWriter: trailing newline,
# numbers and strings mixed in extFields)
CPP_SEND_HEADER = (
    b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x","batch":"0",'
    b'"bornTimestamp":"1795349254376","defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,'
    b'"producerGroup":"PG_TRIAL","properties":"KEYS\\u0001key-0\\u0002TAGS\\u0001TagA\\u0002",'
    b'"queueId":0,"reconsumeTimes":"0","sysFlag":0,"topic":"TrialTopic","unitMode":"0"},'
    b'"flag":0,"language":"CPP","opaque":7,"remark":"","version":63}\n')


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def test_cpp_send_frame_decodes_with_every_ext_value_a_string() -> None:
    data = frame(CPP_SEND_HEADER, b"hello")
    assert rm.frame_length(data[:4]) == len(data) - 4
    command = rm.decode_command(data[4:])
    assert (command.code, command.opaque, command.flag, command.language, command.body) == (
        rm.SEND_MESSAGE, 7, 0, "CPP", b"hello")
    assert command.ext["queueId"] == "0" and command.ext["defaultTopicQueueNums"] == "4"
    assert command.ext["properties"] == "KEYS\x01key-0\x02TAGS\x01TagA\x02"
    assert not command.is_response and not command.is_oneway


def test_reply_echoes_opaque_sets_the_response_bit_and_stringifies_ext() -> None:
    request = rm.decode_command(frame(CPP_SEND_HEADER)[4:])
    reply = rm.decode_command(rm.encode_command(request.reply(0, None, {"queueOffset": 5, "queueId": 1}))[4:])
    assert (reply.code, reply.opaque, reply.is_response) == (0, 7, True)
    assert reply.ext == {"queueOffset": "5", "queueId": "1"}
    raw = rm.encode_command(request.reply(0))
    # what the C++ client reads: serialize type byte 0, a JSON object header
    (mark,) = struct.unpack_from(">i", raw, 4)
    assert mark >> 24 == 0 and json.loads(raw[8:8 + (mark & 0xFFFFFF)])["flag"] == 1


@given(code=st.integers(-(2 ** 15), 2 ** 15 - 1), opaque=st.integers(0, 2 ** 31 - 1), flag=st.integers(0, 3),
       remark=st.one_of(st.none(), st.text(max_size=20)), body=st.binary(max_size=64),
       ext=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=5),
       serialize_type=st.sampled_from([rm.JSON_TYPE, rm.ROCKETMQ_TYPE]))
def test_commands_round_trip_in_both_header_types(code: int, opaque: int, flag: int, remark: str | None, body: bytes,
                                                  ext: dict[str, str], serialize_type: int) -> None:
    command = rm.RemotingCommand(code, opaque, flag, remark, ext, body, "JAVA", 1, serialize_type)
    data = rm.encode_command(command)
    assert rm.frame_length(data[:4]) == len(data) - 4
    back = rm.decode_command(data[4:])
    expected_remark = remark or None if serialize_type == rm.ROCKETMQ_TYPE else remark
    assert (back.code, back.opaque, back.flag, back.remark, back.ext, back.body, back.serialize_type) == (
        code, opaque, flag, expected_remark, ext, body, serialize_type)


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_any_bytes_decode_to_a_command_or_a_frame_error(data: bytes) -> None:
    with contextlib.suppress(rm.FrameError):
        command = rm.decode_command(data)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in command.ext.items())


@settings(max_examples=300)
@given(header=st.binary(max_size=80), serialize_type=st.integers(0, 1))
def test_garbled_headers_are_frame_errors(header: bytes, serialize_type: int) -> None:
    with contextlib.suppress(rm.FrameError):
        command = rm.decode_command(frame(header, b"", serialize_type)[4:])
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in command.ext.items())


@pytest.mark.parametrize("header", [b"[1, 2]", b'{"code": "ten"}', b'{"extFields": [1]}',
                                    b'{"extFields": {"a": {"b": 1}}}', b"\xff\xfe", b"{"])
def test_headers_that_are_not_commands(header: bytes) -> None:
    with pytest.raises(rm.FrameError):
        rm.decode_command(frame(header)[4:])


def test_header_length_past_the_frame_is_refused() -> None:
    with pytest.raises(rm.FrameError, match="exceeds"):
        rm.decode_command(struct.pack(">i", 1000) + b"{}")


def encode_batch(items: list[tuple[int, bytes, bytes]]) -> bytes:
    """MessageDecoder.encodeMessages, written out from its field list."""
    out = b""
    for flag, body, props in items:
        total = 20 + len(body) + 2 + len(props)
        out += struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props
    return out


def test_batch_bodies_split_into_their_messages() -> None:
    items = rm.decode_batch(encode_batch([(0, b"one", b"KEYS\x01a\x02UNIQ_KEY\x01U1\x02"), (3, b"", b"")]))
    assert [(i.flag, i.body, i.properties) for i in items] == [
        (0, b"one", {"KEYS": "a", "UNIQ_KEY": "U1"}), (3, b"", {})]


@pytest.mark.parametrize("cut", [1, 5, 21, 25])
def test_truncated_batches_are_frame_errors(cut: int) -> None:
    data = encode_batch([(0, b"payload", b"K\x01v\x02")])
    with pytest.raises(rm.FrameError):
        rm.decode_batch(data[:-cut])


def heartbeat(client: str, *groups: str) -> bytes:
    return json.dumps({"clientID": client, "consumerDataSet": [
        {"groupName": g, "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0,
         "subscriptionDataSet": [{"topic": "T", "subString": "*", "subVersion": "1"}]} for g in groups],
        "producerDataSet": [{"groupName": "PG"}]}).encode() + b"\n"


def test_consumer_table_follows_heartbeats_unregisters_closes_and_expiry() -> None:
    table = ConsumerTable(max_groups=10, expire_ms=1000)
    assert table.heartbeat(heartbeat("c1", "G1", "G2"), connection=1, now_ms=0) == 2
    table.heartbeat(heartbeat("c2", "G1"), connection=2, now_ms=500)
    assert table.consumers("G1", 600) == ["c1", "c2"]
    table.unregister("c2", "G1")
    assert table.consumers("G1", 600) == ["c1"]
    table.drop_connection(1)
    assert table.consumers("G1", 600) == [] and table.consumers("G2", 600) == []
    table.heartbeat(heartbeat("c3", "G3"), connection=3, now_ms=0)
    assert table.consumers("G3", 1000) == ["c3"]
    assert table.consumers("G3", 1001) == []  # no heartbeat for longer than expire_ms


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"clientID": 5}', b'{"clientID": "c", "consumerDataSet": 3}',
                                  b'{"clientID": "c", "consumerDataSet": [{"groupName": ""}]}'])
def test_malformed_heartbeats_are_refused(body: bytes) -> None:
    with pytest.raises(ClientBodyError):
        ConsumerTable(max_groups=10, expire_ms=1000).heartbeat(body, 1, 0)


def test_group_count_is_bounded() -> None:
    table = ConsumerTable(max_groups=2, expire_ms=1000)
    table.heartbeat(heartbeat("c", "A", "B"), 1, 0)
    with pytest.raises(ClientBodyError, match="more than 2"):
        table.heartbeat(heartbeat("c", "C"), 1, 0)


def lock_body(client: str, *queues: int) -> bytes:
    return json.dumps({"consumerGroup": "G", "clientId": client,
                       "mqSet": [{"topic": "T", "brokerName": "broker-a", "queueId": q} for q in queues]}).encode()


def test_queue_locks_go_to_one_client_until_unlocked_or_lapsed() -> None:
    locks = QueueLocks()
    assert len(json.loads(locks.lock(lock_body("a", 0, 1), now_ms=0))["lockOKMQSet"]) == 2
    assert json.loads(locks.lock(lock_body("b", 1, 2), now_ms=1000))["lockOKMQSet"] == [
        {"topic": "T", "brokerName": "broker-a", "queueId": 2}]
    locks.unlock(lock_body("a", 1))
    assert len(json.loads(locks.lock(lock_body("b", 1), now_ms=2000))["lockOKMQSet"]) == 1
    assert len(json.loads(locks.lock(lock_body("b", 0), now_ms=60_001))["lockOKMQSet"]) == 1  # a's lapsed
    with pytest.raises(ClientBodyError):
        locks.lock(b'{"consumerGroup": "G", "clientId": "a", "mqSet": [{"queueId": "x"}]}', 0)
