"""The request contract (mqstore.ipc.wire.requests): every class encodes to the bytes today's clients
send (``schema.pack(schema.request(op, id, **fields))``), decodes back from them, and refuses a bad
map with a SchemaError that names the field."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.batch.key_text import KeyText
from mqstore.engine.log.host import Host
from mqstore.ipc.client.key_queries import LONG_MAX
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.encoded import BatchEncoder, Encoding
from mqstore.ipc.wire.messages import Outgoing
from mqstore.ipc.wire.requests import Op, Request, SendMessage, decode_request

TOPICS = st.text("abcXYZ019_-%|", min_size=1, max_size=20)
GROUPS = st.text("abcXYZ019_-", min_size=1, max_size=20)
NAMES = st.text(max_size=40)
QUEUES = st.integers(0, (1 << 31) - 1)
OFFSETS = st.integers(0, LONG_MAX)
IDS = st.one_of(st.integers(0, 1 << 40), st.text(max_size=8))


def maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


MESSAGES = st.builds(
    SendMessage, TOPICS, st.binary(max_size=64), maybe(st.lists(NAMES, max_size=3).map(tuple)),
    maybe(st.dictionaries(NAMES, NAMES, max_size=3)), maybe(st.integers(-(1 << 31), (1 << 31) - 1)),
    maybe(st.integers(0, 16)), maybe(NAMES), maybe(QUEUES), maybe(NAMES), maybe(OFFSETS), maybe(st.integers(0, 3)),
    maybe(OFFSETS), maybe(st.tuples(st.sampled_from(["127.0.0.1", "::1", "10.0.0.7"]), st.integers(0, 65535))))
RECEIPTS = st.lists(st.lists(st.one_of(NAMES, QUEUES), min_size=0, max_size=5), max_size=5).map(tuple)

STRATEGIES: dict[type[Request], st.SearchStrategy[Any]] = {
    requests.Send: st.builds(requests.Send, st.lists(MESSAGES, min_size=1, max_size=5).map(tuple)),
    requests.SendEncoded: st.builds(requests.SendEncoded, st.binary(max_size=32), st.binary(max_size=32),
                                    st.lists(TOPICS, max_size=3).map(tuple), st.lists(NAMES, max_size=3).map(tuple),
                                    st.binary(max_size=16), st.binary(max_size=16)),
    requests.Encoding: st.just(requests.Encoding()),
    requests.Topics: st.just(requests.Topics()),
    requests.Ping: st.just(requests.Ping()),
    requests.CreateTopic: st.builds(requests.CreateTopic, NAMES, maybe(st.integers(1, 1 << 20))),
    requests.DeleteTopic: st.builds(requests.DeleteTopic, NAMES),
    requests.Pull: st.builds(requests.Pull, maybe(NAMES), TOPICS, QUEUES, OFFSETS, maybe(st.integers(1, 1024)),
                             maybe(st.integers(1, 1 << 20)), maybe(st.booleans()), maybe(NAMES),
                             maybe(st.integers(0, 60_000)), maybe(st.booleans()), maybe(st.booleans())),
    requests.QueryKey: st.builds(requests.QueryKey, TOPICS, NAMES, maybe(st.integers(1, 1024)), maybe(st.booleans()),
                                 maybe(OFFSETS), maybe(OFFSETS)),
    requests.QueryKeys: st.builds(requests.QueryKeys, TOPICS, st.lists(NAMES, min_size=1, max_size=4).map(tuple),
                                  maybe(st.integers(1, 1024)), maybe(OFFSETS), maybe(OFFSETS)),
    requests.QueryUniq: st.builds(requests.QueryUniq, TOPICS, NAMES, maybe(st.booleans())),
    requests.ViewId: st.builds(requests.ViewId, NAMES, maybe(st.booleans())),
    requests.OffsetByTime: st.builds(requests.OffsetByTime, TOPICS, QUEUES, OFFSETS, maybe(st.booleans())),
    requests.QueueInfo: st.builds(requests.QueueInfo, TOPICS),
    requests.CommitOffset: st.builds(requests.CommitOffset, NAMES, TOPICS, QUEUES, OFFSETS, maybe(st.booleans())),
    requests.FetchOffset: st.builds(requests.FetchOffset, NAMES, TOPICS, QUEUES),
    requests.Groups: st.just(requests.Groups()),
    requests.GroupDescribe: st.builds(requests.GroupDescribe, NAMES),
    requests.DeleteTopicOffsets: st.builds(requests.DeleteTopicOffsets, TOPICS),
    requests.GroupActivity: st.just(requests.GroupActivity()),
    requests.AckStats: st.just(requests.AckStats()),
    requests.AckPull: st.builds(requests.AckPull, GROUPS, TOPICS, QUEUES, st.text(min_size=1, max_size=20),
                                maybe(st.integers(0, 60_000)), maybe(NAMES), maybe(st.integers(1, 1024)),
                                maybe(st.integers(1, 1000)), maybe(st.integers(1, 3600_000))),
    requests.Ack: st.builds(requests.Ack, RECEIPTS),
    requests.Nack: st.builds(requests.Nack, RECEIPTS, maybe(st.booleans())),
    requests.AckRelease: st.builds(requests.AckRelease, GROUPS, TOPICS, st.text(min_size=1, max_size=20),
                                   st.lists(QUEUES, max_size=4).map(tuple),
                                   maybe(st.lists(st.tuples(QUEUES, OFFSETS), max_size=4).map(tuple))),
    requests.EndTransaction: st.builds(requests.EndTransaction, NAMES, OFFSETS, OFFSETS, st.sampled_from([0, 8, 12]),
                                       maybe(st.booleans())),
    requests.RegisterProducer: st.builds(requests.RegisterProducer,
                                         st.lists(st.text(min_size=1, max_size=10), max_size=3).map(tuple)),
    requests.ResumeCheck: st.builds(requests.ResumeCheck, OFFSETS),
    requests.Status: st.just(requests.Status()),
    requests.Stop: st.just(requests.Stop()),
    requests.Promote: st.builds(requests.Promote, st.sampled_from(["ASYNC_MASTER", "SYNC_MASTER"])),
    requests.OffsetTable: st.just(requests.OffsetTable()),
    requests.AckMarks: st.just(requests.AckMarks()),
    requests.MergeOffsets: st.builds(requests.MergeOffsets, st.lists(st.tuples(TOPICS, GROUPS, QUEUES, OFFSETS),
                                                                     max_size=4).map(tuple),
                                     st.lists(st.tuples(GROUPS.filter(bool), st.integers(1, 2**63 - 1)),
                                              max_size=3).map(tuple)),
    requests.MergeAckMarks: st.builds(requests.MergeAckMarks, st.lists(st.tuples(GROUPS, TOPICS, QUEUES, OFFSETS),
                                                                       max_size=4).map(tuple)),
    requests.PurgeQueues: st.builds(requests.PurgeQueues, TOPICS, maybe(st.lists(QUEUES, max_size=4).map(tuple)),
                                    maybe(st.lists(st.tuples(QUEUES, OFFSETS), max_size=4).map(tuple))),
    requests.PersistOffsets: st.just(requests.PersistOffsets()),
    requests.WatchQueues: st.builds(requests.WatchQueues, TOPICS, st.lists(QUEUES, max_size=4).map(tuple),
                                    st.integers(0, 60_000)),
    requests.TopicStats: st.builds(requests.TopicStats, TOPICS),
    requests.DeleteGroup: st.builds(requests.DeleteGroup, NAMES, OFFSETS),
    requests.AckGroupStats: st.builds(requests.AckGroupStats, NAMES),
    requests.PullQueues: st.builds(requests.PullQueues, maybe(NAMES), TOPICS, st.dictionaries(
                                       QUEUES, OFFSETS, min_size=1, max_size=4).map(lambda d: tuple(d.items())),
                                   maybe(st.integers(1, 65_536)), maybe(st.integers(1, 1 << 20)), maybe(NAMES),
                                   maybe(st.integers(0, 60_000)), maybe(st.booleans())),
    requests.AckPullQueues: st.builds(requests.AckPullQueues, GROUPS, TOPICS,
                                      st.lists(QUEUES, min_size=1, max_size=4, unique=True).map(tuple),
                                      st.text(min_size=1, max_size=20), maybe(st.integers(0, 60_000)), maybe(NAMES),
                                      maybe(st.integers(1, 1024)), maybe(st.integers(1, 1000)),
                                      maybe(st.integers(1, 3600_000))),
}
SERVED = [requests.WRITER, requests.READER, requests.TRANSACTIONS, requests.SUPERVISOR]
EVERY_REQUEST = st.sampled_from(sorted(STRATEGIES, key=lambda c: c.OP.value)).flatmap(lambda c: STRATEGIES[c])


def todays_map(request: Request, request_id: Any) -> dict[str, Any]:
    """The map as clients built it before the classes: ``schema.request`` with the fields given."""
    wire_names = request.WIRE or tuple(f.name for f in fields(request))
    values = {key: getattr(request, f.name) for key, f in zip(wire_names, fields(request), strict=True)}
    if isinstance(request, requests.Send):
        values = {"msgs": [m.wire() for m in request.msgs]}
    if isinstance(request, requests.SendEncoded):
        values.pop("records")
    return schema.request(request.OP.value, request_id, **{k: v for k, v in values.items() if v is not None})


def test_every_op_served_has_a_class_and_every_class_a_strategy() -> None:
    served = {op: cls for s in SERVED for op, cls in s.ops.items()}
    assert set(served) == {op.value for op in Op}
    assert set(served.values()) == set(STRATEGIES)


@given(EVERY_REQUEST, IDS)
def test_every_request_encodes_to_todays_bytes_and_decodes_back(request: Request, request_id: Any) -> None:
    frames = request.frames(request_id)
    assert frames[0] == schema.pack({**todays_map(request, request_id), **(
        {"parts": len(request.parts)} if request.parts else {})})
    message = schema.unpack_message(frames[0], frames[1:])
    assert message.get("id") == request_id
    served = next(s for s in SERVED if request.OP.value in s.ops)
    assert decode_request(message, served) == request


@given(st.builds(Outgoing, TOPICS, st.binary(max_size=32), maybe(NAMES), st.lists(NAMES, max_size=3).map(tuple),
                 st.dictionaries(NAMES, NAMES, max_size=2), maybe(QUEUES), maybe(NAMES),
                 st.integers(-(1 << 31), (1 << 31) - 1), maybe(OFFSETS),
                 maybe(st.tuples(st.just("127.0.0.1"), st.integers(0, 65535))), st.integers(0, 16),
                 st.integers(0, 3), st.integers(0, 1 << 40)), IDS)
def test_a_producers_send_is_the_bytes_of_its_outgoing_maps(message: Outgoing, request_id: Any) -> None:
    sent = requests.Send((SendMessage.of(message),))
    assert sent.frames(request_id) == [schema.pack(schema.request("send", request_id, msgs=[message.to_wire()]))]


def test_a_consumers_pull_is_todays_map() -> None:
    pull = requests.Pull("g", "T", 3, 17, 32, 1 << 20, True, "a || b", 500, True, False)
    assert pull.frames(9) == [schema.pack(schema.request(
        "pull", 9, group="g", topic="T", queue=3, offset=17, max=32, max_bytes=1 << 20, by_bytes=True,
        tags="a || b", wait_ms=500, raw=True, trace=False))]


@pytest.mark.parametrize(("request_", "op", "today"), [  # each as its client wrote the map before the classes
    (requests.AckPull("g", "T", 1, "c", 500, "*", 32, 8, 30_000), "ack_pull",
     {"group": "g", "topic": "T", "queue": 1, "consumer": "c", "wait_ms": 500, "tags": "*", "max": 32, "prefetch": 8,
      "visibility_ms": 30_000}),
    (requests.AckRelease("g", "T", "c", (0, 1), ((1, 5),)), "ack_release",
     {"group": "g", "topic": "T", "consumer": "c", "queues": [0, 1], "read": [[1, 5]]}),
    (requests.Nack((["g", "T", 0, 3],), False), "nack", {"receipts": [["g", "T", 0, 3]], "requeue": False}),
    (requests.CommitOffset("g", "T", 2, 9, admin=True), "commit_offset",
     {"group": "g", "topic": "T", "queue": 2, "offset": 9, "admin": True}),
    (requests.QueryKey("T", "k", 64, True), "query_key", {"topic": "T", "key": "k", "max": 64, "raw": True}),
    (requests.QueryKeys("T", ("a", "b"), 64, 0, LONG_MAX), "query_keys",
     {"topic": "T", "keys": ["a", "b"], "max": 64, "begin_ms": 0, "end_ms": LONG_MAX}),
    (requests.OffsetByTime("T", 0, 5, False), "offset_by_time", {"topic": "T", "queue": 0, "ts_ms": 5, "upper": False}),
    (requests.EndTransaction("p", 3, 4096, 8, True), "end_transaction",
     {"group": "p", "queue_offset": 3, "phys_offset": 4096, "state": 8, "from_check": True}),
    (requests.RegisterProducer(("p",)), "register_producer", {"groups": ["p"]}),
    (requests.CreateTopic("T", 4), "create_topic", {"topic": "T", "queues": 4}),
])
def test_each_clients_map_is_todays(request_: Request, op: str, today: dict[str, Any]) -> None:
    assert request_.frames(7) == [schema.pack(schema.request(op, 7, **today))]


def test_a_producer_encoded_batch_is_todays_map_and_frame() -> None:
    encoder = BatchEncoder(Encoding(Host("127.0.0.1", 10911), True, 1 << 20))
    batch = encoder.encode_columns("T", [b"a", b"bc"], tags="x", keys=[("k1",), ()])
    text, bounds = KeyText.of(batch.uniq_keys, batch.keys).wire()
    today = schema.pack_message(schema.request(
        "send_encoded", 4, columns=batch.columns, topics=batch.topics, tags=batch.tags, keys=text, key_bounds=bounds),
        (batch.records,))
    assert requests.SendEncoded.of(batch).frames(4) == today


def _decode(served: requests.Served, **message: Any) -> Request:
    return decode_request({"v": 1, "id": 1, **message}, served)


@pytest.mark.parametrize(("served", "message", "named"), [
    (requests.READER, {"op": "pull", "topic": "T", "queue": -1, "offset": 0}, "'queue' = -1 is below 0"),
    (requests.READER, {"op": "pull", "topic": "T", "queue": 0}, "missing field 'offset'"),
    (requests.READER, {"op": "pull", "topic": "T", "queue": 0, "offset": 0, "max": 1025}, "'max' = 1025 is above 1024"),
    (requests.READER, {"op": "pull", "topic": "T", "queue": 0, "offset": 0, "max": 4096, "by_bytes": True,
                       "wait_ms": True}, "field 'wait_ms' must be int, got a boolean"),
    (requests.READER, {"op": "pull", "topic": "a/b", "queue": 0, "offset": 0}, "topic 'a/b' has characters"),
    (requests.READER, {"op": "query_keys", "topic": "T", "keys": []}, "keys must hold 1 to 1024 keys"),
    (requests.READER, {"op": "ack_pull", "group": "g/", "topic": "T", "queue": 0, "consumer": "c"}, "group: "),
    (requests.READER, {"op": "ack_pull", "group": "g", "topic": "T", "queue": 0, "consumer": ""}, "consumer must"),
    (requests.READER, {"op": "ack", "receipts": [[]] * 10_001}, "at most 10000 receipts"),
    (requests.READER, {"op": "ack_release", "group": "g", "topic": "T", "consumer": "c", "queues": [-1]}, "queues"),
    (requests.WRITER, {"op": "send", "msgs": []}, "field 'msgs' holds no message"),
    (requests.WRITER, {"op": "send", "msgs": [{"topic": "T"}]}, "missing field 'body'"),
    (requests.WRITER, {"op": "send", "msgs": [{"topic": "T", "body": b"", "born_host": ["x", 1]}]}, "born_host"),
    (requests.WRITER, {"op": "send", "msgs": [{"topic": "T", "body": b"", "flag": 1 << 31}]}, "'flag'"),
    (requests.WRITER, {"op": "send", "msgs": [{"topic": "T", "body": b"", "reconsume_times": -1}]},
     "field 'reconsume_times' = -1 is below 0"),
    (requests.WRITER, {"op": "send", "msgs": [{"topic": "T", "body": b"", "queue": "1"}]},
     "field 'queue' must be int, got str"),
    (requests.WRITER, {"op": "send", "msgs": [{"body": b""}]}, "missing field 'topic'"),
    (requests.WRITER, {"op": "send", "msgs": [{"topic": "T", "body": b"", "keys": [1]}]}, "keys must be strings"),
    (requests.WRITER, {"op": "send_encoded", "columns": b""}, "the one frame after its map"),
    (requests.WRITER, {"op": "create_topic", "topic": "T", "queues": 0}, "'queues' = 0 is below 1"),
    (requests.WRITER, {"op": "ping", "parts": [b"x"]}, "'ping' takes no frames after its map"),
    (requests.TRANSACTIONS, {"op": "end_transaction", "group": "g", "queue_offset": 0, "phys_offset": 0,
                             "state": 4}, "state must be 0"),
    (requests.TRANSACTIONS, {"op": "register_producer", "groups": [""]}, "groups must be non-empty strings"),
    (requests.SUPERVISOR, {"op": 7}, "field 'op' must be str"),
])
def test_a_bad_field_is_refused_by_name(served: requests.Served, message: dict[str, Any], named: str) -> None:
    with pytest.raises(schema.SchemaError) as caught:
        _decode(served, **message)
    assert named in str(caught.value)
    assert not isinstance(caught.value, requests.UnknownOpError)


def test_an_op_another_actor_serves_is_unknown_here() -> None:
    with pytest.raises(requests.UnknownOpError, match="the writer does not serve 'pull'"):
        _decode(requests.WRITER, op="pull", topic="T", queue=0, offset=0)
    with pytest.raises(requests.UnknownOpError, match="the supervisor does not serve 'reboot'"):
        _decode(requests.SUPERVISOR, op="reboot")


def test_a_request_of_no_fields_ignores_what_else_its_map_holds() -> None:
    assert _decode(requests.READER, op="ping", pad=b"x" * 10) == requests.Ping()
