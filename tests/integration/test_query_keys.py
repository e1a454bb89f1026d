"""Query by key through a reader: one key at a time, several in flight, and many keys in one request.
The tests share one broker, its remoting front on, each test on its own topic."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from mqstore.ipc.client.api import Admin, BrokerError, Consumer, Producer, ReceivedMessage
from mqstore.ipc.remoting import codec as rm
from tests.integration.broker import Broker, free_port_range, wait_for

LONG_MAX = 2 ** 62


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("keys"), remoting_port=free_port_range(1)) as running:
        yield running


def test_many_keys_in_one_request_answer_what_one_key_at_a_time_does(broker: Broker) -> None:
    with Producer(broker.store) as producer, Admin(broker.store) as admin:
        results = producer.send_batch([{"topic": "Orders", "body": f"m{i}".encode(), "keys": [f"k{i % 50}"]}
                                       for i in range(200)] + [{"topic": "Orders", "body": b"aa", "keys": ["Aa"]},
                                                               {"topic": "Orders", "body": b"bb", "keys": ["BB"]}])
        assert all(r.ok for r in results)
        wait_for(lambda: len(admin.query_by_key("Orders", "BB")) == 1, 30, "the index builder to index the batch")
        keys = [f"k{i}" for i in range(50)] + ["Aa", "BB", "missing"]
        one_by_one = [admin.query_by_key("Orders", k, max_count=3) for k in keys]
        batches = admin.query_keys("Orders", keys, max_count=3)
        assert [list(b) for b in batches] == one_by_one
        assert [b.bodies() for b in batches[:2]] == [[b"m50", b"m100", b"m150"], [b"m51", b"m101", b"m151"]]
        assert batches[50].bodies() == [b"aa"] and batches[51].bodies() == [b"bb"] and len(batches[52]) == 0
        in_flight = [admin.query_by_key_async("Orders", k, max_count=3) for k in keys]
        assert [list(f.result()) for f in in_flight] == one_by_one
        assert [m.body for m in admin.query_by_uniq_key("Orders", results[7].uniq_key or "")] == [b"m7"]
        with pytest.raises(BrokerError, match="BAD_REQUEST"):
            admin.query_keys("Orders", [])
        with pytest.raises(BrokerError, match="BAD_REQUEST"):
            admin.query_keys("Orders", ["k"] * 1025)
        for hostile in ([7, "k1"], ["k" * 1025], [None]):
            with pytest.raises(BrokerError, match="BAD_REQUEST"):
                admin.query_keys("Orders", hostile)  # type: ignore[arg-type]
        with pytest.raises(BrokerError, match="BAD_REQUEST"):
            admin.query_keys("../../etc", ["k1"])
        assert admin.ping()["pid"]  # the reader still serves


def test_query_by_key_misses_messages_when_keys_collide(broker: Broker) -> None:
    """3,000 messages, 143 under four keys of one String.hashCode, 33 of them 'AaBB': the readers'
    queries (one key, many keys, and RocketMQ's QUERY_MESSAGE through the remoting front) answered a
    few of the 33, the colliding keys having taken the index's 64 places."""
    colliding = ("AaAa", "BBAa", "BBBB")
    keys = [f"k{i}" for i in range(3000)]
    for j in range(143):
        keys[j * 21] = "AaBB" if j % 13 in (0, 4, 8) else colliding[j % 3]
    wanted = {key: [f"m{i}".encode() for i, k in enumerate(keys) if k == key] for key in ("AaBB", *colliding)}
    port = broker.remoting_port
    assert port is not None
    with (Producer(broker.store) as producer, Admin(broker.store) as admin,
          rm.RemotingClient("127.0.0.1", port) as client):
        for start in range(0, 3000, 500):
            assert all(r.ok for r in producer.send_batch([{"topic": "Hashed", "body": f"m{i}".encode(),
                                                           "keys": [keys[i]]} for i in range(start, start + 500)]))
        wait_for(lambda: len(admin.query_by_key("Hashed", "k2999")) == 1, 30, "the index builder to index them all")
        assert [m.body for m in admin.query_by_key("Hashed", "AaBB", max_count=1000)] == wanted["AaBB"]
        assert [b.bodies() for b in admin.query_keys("Hashed", list(wanted), max_count=1000)] == list(wanted.values())
        reply = client.call(rm.QUERY_MESSAGE, {"topic": "Hashed", "key": "AaBB", "maxNum": 64, "beginTimestamp": 0,
                                               "endTimestamp": LONG_MAX})
        assert reply.code == rm.SUCCESS and [r.body for r in rm.decode_records(reply.body)] == wanted["AaBB"]


def test_a_packed_pull_inflates_compressed_bodies_and_filters_tags(broker: Broker) -> None:
    """A body a RocketMQ client compressed (sysFlag 0x1) reaches the application inflated, whether the
    message is decoded whole or only its body read; 'Aa' and 'BB' share a tag hash."""
    with Producer(broker.store) as producer:
        assert all(r.ok for r in producer.send_batch(
            [{"topic": "Packed", "body": zlib.compress(b"inflated " * 50), "sys_flag": 0x1, "tags": "Aa",
              "queue_id": 0},
             {"topic": "Packed", "body": b"collides", "tags": "BB", "queue_id": 0},
             {"topic": "Packed", "body": b"plain", "tags": "Aa", "queue_id": 0}]))
        with Consumer(broker.store, group="g", topic="Packed", queues=[0], tags="Aa", start="earliest",
                      long_poll_ms=200) as consumer:
            got: list[ReceivedMessage] = []

            def two() -> bool:
                got.extend(consumer.poll(200))
                return len(got) >= 2

            wait_for(two, 30, "two messages tagged Aa")
            assert [m.body for m in got] == [b"inflated " * 50, b"plain"]
            consumer.seek(0, 0)
            batch = consumer.poll_batch(5000)
            assert batch.bodies() == [b"inflated " * 50, b"plain"] and batch.queue_offsets == [0, 2]
            assert consumer.position(0) == 3
