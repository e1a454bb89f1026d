"""Spanning pulls (``pull_queues``) against a real reader process: several queues answered by one
request, a parked request answered when any of its queues grows, the reply's bounds shared fairly,
the tag filter, purge floors, and malformed requests refused while the reader serves on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import zmq

from mqstore.engine import MessageStore, PutResult, StoreConfig
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.replies import PullQueuesReply
from mqstore.ipc.wire.requests.reader import MAX_SPAN_QUEUES
from tests.integration.broker import wait_for
from tests.integration.test_reader import GEOMETRY, REPLY_S, TOPIC, Broker, put_messages
from tests.integration.test_reader import built as built  # the fixtures, found by their names
from tests.integration.test_reader import start_broker as start_broker


def span(broker: Broker, queues: list[list[int]], **fields: Any) -> PullQueuesReply:
    reply = broker.call("pull_queues", group="g", topic=TOPIC, queues=queues, **fields)
    assert reply["ok"], reply
    return PullQueuesReply.decode(reply)


def offsets_by_queue(reply: PullQueuesReply) -> dict[int, list[int]]:
    return {part.queue_id: [m.queue_offset for m in batch] for part, batch in reply.batches()}


def test_one_request_answers_every_queue_that_has_messages(built: dict[int, list[PutResult]],
                                                           start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    reply = span(broker, [[0, 140], [1, 0], [2, 0], [3, 0]], max=1000, max_bytes=1 << 20)
    assert offsets_by_queue(reply) == {0: list(range(140, 150)), 1: list(range(20))}  # the empty queues say nothing
    assert {(p.queue_id, p.status, p.next_queue_offset, p.max_queue_offset) for p in reply.queues} == {
        (0, "FOUND", 150, 150), (1, "FOUND", 20, 20)}
    first = reply.batches()[0][1][0]
    assert first.body and first.topic == TOPIC
    # each queue's part bounded by max / max_bytes, as a pull's
    bounded = span(broker, [[0, 0], [1, 0]], max=5, max_bytes=1 << 20)
    assert offsets_by_queue(bounded) == {0: list(range(5)), 1: list(range(5))}
    # nothing anywhere: every queue's status, at once without wait_ms
    empty = span(broker, [[0, 150], [3, 0]])
    assert empty.record_count == 0
    assert {(p.queue_id, p.status, p.next_queue_offset) for p in empty.queues} == {
        (0, "OFFSET_OVERFLOW_ONE", 150), (3, "NO_MATCHED_LOGIC_QUEUE", 0)}


def test_a_parked_span_is_answered_when_any_of_its_queues_grows(built: dict[int, list[PutResult]],
                                                                start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    sock = broker.ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(broker.config.endpoints.reader(0))
    with MessageStore.open(broker.store_dir, StoreConfig(geometry=GEOMETRY)) as store:
        sock.send(schema.pack(schema.request("pull_queues", 9, group="g", topic=TOPIC,
                                             queues=[[0, 150], [1, 20], [2, 0]], wait_ms=20_000)))
        wait_for(lambda: broker.call("ping")["parked"] == 1, REPLY_S, "the span to be parked")
        results = put_messages(store, 2, 2)
        broker.announce(results, store.commitlog.max_offset)
        assert sock.poll(int(REPLY_S * 1000))
    frame, *parts = sock.recv_multipart()
    sock.close()
    message = schema.unpack_message(frame, parts)
    assert message["id"] == 9
    reply = PullQueuesReply.decode(message)
    assert offsets_by_queue(reply) == {2: [0, 1]}
    assert broker.call("ping")["parked"] == 0  # no longer parked under its other queues


def test_a_deep_backlog_does_not_starve_the_other_queues(built: dict[int, list[PutResult]],
                                                         start_broker: Callable[..., Broker]) -> None:
    broker = start_broker(fetch_max_count=30)  # the whole reply's bound, shared by its queues
    with MessageStore.open(broker.store_dir, StoreConfig(geometry=GEOMETRY)) as store:
        put_messages(store, 4, 2)  # found off the files: no notice needed
    for _ in range(3):  # whichever queue is read first
        got = offsets_by_queue(span(broker, [[0, 0], [1, 0], [2, 0]], max=1000, max_bytes=1 << 20))
        assert set(got) == {0, 1, 2} and got[2] == [0, 1, 2, 3], got
        assert sum(len(v) for v in got.values()) <= 30
        assert min(len(got[0]), len(got[1])) >= 10  # an equal share of what is left each


def test_the_tag_filter_applies_to_every_queue_and_a_parked_span_waits_past_filtered(
        built: dict[int, list[PutResult]], start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    reply = span(broker, [[0, 140], [1, 10]], max=1000, tags="TagA")
    assert offsets_by_queue(reply) == {0: list(range(140, 150, 2)), 1: list(range(10, 20, 2))}
    sock = broker.ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(broker.config.endpoints.reader(0))
    with MessageStore.open(broker.store_dir, StoreConfig(geometry=GEOMETRY)) as store:
        sock.send(schema.pack(schema.request("pull_queues", 5, group="g", topic=TOPIC, queues=[[1, 20], [2, 0]],
                                             tags="TagA", wait_ms=20_000)))
        wait_for(lambda: broker.call("ping")["parked"] == 1, REPLY_S, "the span to be parked")
        broker.announce(put_messages(store, 1, 1, first=21), store.commitlog.max_offset)  # TagB: filtered out
        wait_for(lambda: broker.call("ping")["parked"] == 1, REPLY_S, "the span parked again")
        assert not sock.poll(0)
        broker.announce(put_messages(store, 1, 1, first=22), store.commitlog.max_offset)  # TagA
        assert sock.poll(int(REPLY_S * 1000))
    frame, *parts = sock.recv_multipart()
    sock.close()
    assert offsets_by_queue(PullQueuesReply.decode(schema.unpack_message(frame, parts))) == {1: [21]}


def test_a_span_reads_from_the_purge_floors(built: dict[int, list[PutResult]],
                                            start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    purged = broker.call("purge_queues", topic=TOPIC, queues=[0, 1])
    assert purged["ok"], purged
    with MessageStore.open(broker.store_dir, StoreConfig(geometry=GEOMETRY)) as store:
        broker.announce(put_messages(store, 2, 1, first=20), store.commitlog.max_offset)
    got = offsets_by_queue(span(broker, [[0, 0], [1, 0]], max=1000, max_bytes=1 << 20))
    assert got == {1: [20, 21]}  # queue 0's backlog and queue 1's first 20 were purged


def test_malformed_spans_are_refused_and_the_reader_serves_on(built: dict[int, list[PutResult]],
                                                              start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()
    bad: list[dict[str, Any]] = [
        {"queues": []},
        {"queues": [[0, 0], [0, 5]]},
        {"queues": [[q, 0] for q in range(MAX_SPAN_QUEUES + 1)]},
        {"queues": [[0]]},
        {"queues": [[0, -1]]},
        {"queues": [["0", 0]]},
        {"queues": "0"},
        {"queues": [[0, 0]], "wait_ms": 10**12},
        {"queues": [[0, 0]], "max": 0},
        {},
    ]
    for fields in bad:
        reply = broker.call("pull_queues", group="g", topic=TOPIC, **fields)
        assert not reply["ok"] and reply["status"] == schema.BAD_REQUEST and reply["reason"], (fields, reply)
    unknown = span(broker, [[99, 0], [1, 0]], max=1)
    assert [(p.queue_id, p.status) for p in unknown.queues] == [(1, "FOUND")]
    alone = span(broker, [[99, 0]])
    assert [(p.queue_id, p.status) for p in alone.queues] == [(99, "NO_MATCHED_LOGIC_QUEUE")]
    assert broker.call("ping")["ok"]
    assert offsets_by_queue(span(broker, [[1, 19]])) == {1: [19]}
