"""Producer-encoded sends through a real broker: what ``send_encoded`` stores is what ``send_batch``
would have stored, consumable, queryable and verified clean after the stop, in both flush modes and
across commitlog rolls; a batch that does not hold together is refused whole. Beside the flush modes'
own brokers, the tests share one (each on its own topics), stopped and verified once they are done."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from mqstore.engine.java.jhash import java_hash
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.api import Admin, BrokerError, Consumer, Outgoing, Producer
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.encoded import OP_SEND_ENCODED, EncodingError, request_fields
from mqstore.scripts.survival.hostile.requests import encoded_requests
from tests.integration.broker import Broker, wait_for


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the tests that need no flush mode or geometry of their own: what they stored,
    refused requests and all, is verified clean after its stop."""
    with Broker(tmp_path_factory.mktemp("encoded")) as running:
        yield running
        assert running.stop() == 0
    report = verify_store(running.store)
    assert report.ok, report


def _drain(store: Path, topic: str, count: int) -> list[object]:
    got: list[object] = []
    with Consumer(store, group=f"g-{topic}", topic=topic, start="earliest", long_poll_ms=200) as consumer:
        wait_for(lambda: got.extend(consumer.poll(200)) or len(got) >= count, 30, f"{count} messages on {topic}")
    return got


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_encoded_batches_are_stored_like_any_send(tmp_path: Path, mode: str) -> None:
    with Broker(tmp_path, mode=mode, commitlog=64 * 1024) as broker, Producer(broker.store) as producer:
        sent = []
        for b in range(12):  # ~20 KiB a batch: several rolls of the 64 KiB commitlog files
            batch = [Outgoing("Fast", f"body-{b}-{i}".encode() * 10, tags="TagA" if i % 2 else None,
                              keys=(f"key-{b}-{i}",) if i % 5 == 0 else (), queue_id=1 if i == 3 else None,
                              shard="order-9" if i == 4 else None) for i in range(60)]
            results = producer.send_encoded(batch)
            assert all(r.ok for r in results), results[:3]
            assert results[3].queue_id == 1
            sent.extend(zip(batch, results, strict=True))
        assert len({r.phys_offset for _, r in sent}) == len(sent)
        by_offset = {(r.queue_id, r.queue_offset): m for m, r in sent}
        received = _drain(broker.store, "Fast", len(sent))
        assert len(received) == len(sent)
        for msg in received:
            original = by_offset[(msg.queue_id, msg.queue_offset)]  # type: ignore[attr-defined]
            assert msg.body == original.body and msg.tags == original.tags  # type: ignore[attr-defined]
            assert msg.keys == original.keys  # type: ignore[attr-defined]
        with Admin(broker.store) as admin:  # the index builder runs apart from the consume queues' builder
            found = wait_for(lambda: admin.query_by_key("Fast", "key-7-10"), 30, "key-7-10 to be indexed")
            assert [m.body for m in found] == [b"body-7-10" * 10]
            first = sent[0][1]
            assert admin.view_by_id(first.msg_id).body == sent[0][0].body  # type: ignore[union-attr]
            assert wait_for(lambda: admin.query_by_uniq_key("Fast", first.uniq_key or ""), 30, "the uniq key")
        assert broker.stop() == 0
    report = verify_store(broker.store)
    assert report.ok, report


def test_columns_are_stored_like_the_same_messages(broker: Broker) -> None:
    with Producer(broker.store) as producer:
        bodies = [f"col-{i}".encode() * 20 for i in range(50)]
        keys = [(f"ck-{i}",) if i % 7 == 0 else () for i in range(50)]
        results = producer.send_encoded_columns("Cols", bodies, tags=["TagA" if i % 2 else None for i in range(50)],
                                                keys=keys)
        assert all(r.ok for r in results) and len({r.phys_offset for r in results}) == 50
        assert producer.send_encoded_columns_async("Cols", [b"one tag for all"] * 3, tags="TagB").result()[2].ok
        received = {msg.body: msg for msg in _drain(broker.store, "Cols", 53)}  # type: ignore[attr-defined]
        for i, body in enumerate(bodies):
            assert received[body].tags == ("TagA" if i % 2 else None)  # type: ignore[attr-defined]
            assert received[body].keys == keys[i]  # type: ignore[attr-defined]
        assert received[b"one tag for all"].tags == "TagB"  # type: ignore[attr-defined]
        with Admin(broker.store) as admin:
            found = wait_for(lambda: admin.query_by_key("Cols", "ck-14"), 30, "ck-14 to be indexed")
            assert [m.body for m in found] == [bodies[14]]


def test_a_broken_batch_is_refused_whole_and_nothing_is_written(broker: Broker) -> None:
    with Producer(broker.store) as producer:
        assert producer.send_encoded([Outgoing("Torn", b"first")])[0].ok
        encoder = producer._batch_encoder()
        batch = encoder.encode([Outgoing("Torn", b"x" * 50), Outgoing("Torn", b"y" * 50)])
        records = bytearray(batch.records)
        records[records.index(b"y" * 50) + 7] ^= 0xFF  # the second body: its CRC no longer matches
        with pytest.raises(BrokerError, match="MESSAGE_ILLEGAL"):
            producer._channel.call("ingress", OP_SEND_ENCODED, timeout_ms=3000, parts=(bytes(records),),
                                   **request_fields(batch)).result()
        with pytest.raises(EncodingError):
            producer.send_encoded([Outgoing("Torn", b"later", properties={"DELAY": "3"})])
        assert producer.send_encoded([Outgoing("Torn", b"after")])[0].queue_offset == 0  # queue 1: round robin
        with Admin(broker.store) as admin:
            wait_for(lambda: sum(hi - lo for lo, hi in admin.queue_info("Torn").values()) == 2, 30, "two stored")


def test_send_only_properties_are_refused_on_the_encoded_path_by_client_and_writer(broker: Broker) -> None:
    """DELAY, TRAN_MSG and the timer properties are read by the send path's put rules, which store the
    message where it waits: ipc's encoder refuses them, and a producer that encodes such a record
    itself is refused by the writer's batch check with the reason, so none bypasses its rule."""
    with Producer(broker.store) as producer:
        for name, value in (("DELAY", "3"), ("TRAN_MSG", "true"), ("TIMER_DELAY_MS", "100")):
            with pytest.raises(EncodingError):
                producer.send_encoded([Outgoing("Rule", b"x", properties={name: value, "PGROUP": "pg"})])
            stand_in = "X" * len(name)  # the same length: the forged batch still holds together
            batch = producer._batch_encoder().encode([Outgoing("Rule", b"x", properties={stand_in: value})])
            forged = bytes(batch.records).replace(f"{stand_in}\x01".encode(), f"{name}\x01".encode())
            assert forged != bytes(batch.records)
            with pytest.raises(BrokerError, match="MESSAGE_ILLEGAL: a record carries DELAY, TRAN_MSG or a timer"):
                producer._channel.call("ingress", OP_SEND_ENCODED, timeout_ms=10_000, parts=(forged,),
                                       **request_fields(batch)).result()
        assert producer.send_encoded([Outgoing("Rule", b"after")])[0].ok
        with Admin(broker.store) as admin:
            wait_for(lambda: sum(hi - lo for lo, hi in admin.queue_info("Rule").values()) == 1, 30, "one stored")


def test_one_broken_request_in_a_round_is_refused_and_the_others_are_stored(broker: Broker) -> None:
    with Producer(broker.store) as producer:
        encoder = producer._batch_encoder()
        broken = encoder.encode([Outgoing("Round", b"z" * 40)])
        records = bytearray(broken.records)
        records[records.index(b"z" * 40)] ^= 0xFF
        for _ in range(5):  # sent together, so some rounds merge good requests with the broken one
            good = [producer.send_encoded_async([Outgoing("Round", f"{i}".encode(), tags="A")]) for i in range(8)]
            bad = producer._channel.call("ingress", OP_SEND_ENCODED, timeout_ms=5000, parts=(bytes(records),),
                                         **request_fields(broken))
            good += [producer.send_encoded_async([Outgoing("Other", b"x"), Outgoing("Round", b"y")])]
            assert all(r.ok for f in good for r in f.result())
            with pytest.raises(BrokerError, match="MESSAGE_ILLEGAL"):
                bad.result()
        with Admin(broker.store) as admin:  # consumable once the consume-queue builder has applied them
            wait_for(lambda: sum(hi - lo for lo, hi in admin.queue_info("Round").values()) == 5 * 9, 30, "Round")
            wait_for(lambda: sum(hi - lo for lo, hi in admin.queue_info("Other").values()) == 5, 30, "Other")


def test_malformed_multipart_sends_are_answered_with_a_reason_and_the_writer_goes_on(broker: Broker) -> None:
    """Every shape of mqstore.scripts.survival.hostile.requests.encoded_requests, alone and all in one round. All in
    one round also pins a bug: a send_encoded whose columns were not whole rows, merged with another
    request of its round, raised ValueError in the merge and took the writer down (the round's other
    requests unanswered); the merge now refuses it like any batch that does not hold together."""
    with Producer(broker.store) as producer:
        encoding = producer._batch_encoder().encoding
        writer_pid = broker.pid_of("writer")
        shapes = encoded_requests(encoding, random.Random(7))
        ctx: zmq.Context[object] = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.connect(broker.endpoints().ingress)
        try:
            for alone in (True, False):  # then all at once: they meet in merged rounds
                replies = {}
                for name, frames in shapes.items():
                    sock.send_multipart(frames)
                    if alone:
                        assert sock.poll(10_000), name
                        replies[name] = schema.unpack(sock.recv())
                while len(replies) < len(shapes):
                    assert sock.poll(10_000), f"{len(shapes) - len(replies)} requests unanswered"
                    replies[f"reply-{len(replies)}"] = schema.unpack(sock.recv())
                refused = [r for r in replies.values() if r["ok"] is False]
                assert len(refused) == len(shapes) - 1  # all but the valid one
                assert {r["status"] for r in refused} <= {"BAD_REQUEST", "MESSAGE_ILLEGAL"}
                assert all(r["reason"] for r in refused)
            for name, status, words in [("announced_but_missing", "BAD_REQUEST", "announces 1 part(s), 0 frame(s)"),
                                        ("two_parts", "BAD_REQUEST", "one frame after its map, got 2"),
                                        ("records_in_the_map", "BAD_REQUEST", "one frame after its map, got 0"),
                                        ("part_on_ping", "BAD_REQUEST", "takes no frames after its map"),
                                        ("records_cut_short", "MESSAGE_ILLEGAL", "sizes add up"),
                                        ("records_flipped", "MESSAGE_ILLEGAL", ""),
                                        ("key_bounds_past_text", "MESSAGE_ILLEGAL", "leaves the 65-byte key text"),
                                        ("key_bounds_miscounted", "MESSAGE_ILLEGAL", "2 records need 5 key bounds"),
                                        ("key_bounds_torn", "BAD_REQUEST", "whole int32s"),
                                        ("keys_not_utf8", "MESSAGE_ILLEGAL", "record 0's UNIQ_KEY is not UTF-8")]:
                sock.send_multipart(shapes[name])
                assert sock.poll(10_000)
                reply = schema.unpack(sock.recv())
                assert reply["status"] == status and words in reply["reason"], (name, reply)
        finally:
            sock.close(0)
            ctx.term()
        assert producer.send_encoded([Outgoing("Fast", b"after")])[0].ok
        assert broker.pid_of("writer") == writer_pid  # never restarted


def test_a_shard_key_hashing_to_int_min_lands_in_one_queue_by_either_send_path(broker: Broker) -> None:
    """The writer picked abs(hash) % n and the producer's encoder sent abs(hash) & 0x7FFFFFFF: for a
    key whose Java hash is -2**31 that is 0, so with a queue count that is not a power of two the same
    key went to one queue through ``send`` and to another through ``send_encoded``. RocketMQ's
    SelectMessageQueueByHash takes Java's remainder, then its absolute value: -2147483648 % 3 == -2,
    so queue 2 of 3; -2147483648 % 5 == -3, so queue 3 of 5."""
    key = "polygenelubricants"
    assert java_hash(key) == -2**31
    with Producer(broker.store) as producer, Admin(broker.store) as admin:
        for topic, queues, rocketmq_queue in (("Three", 3, 2), ("Five", 5, 3)):
            assert admin.create_topic(topic, queues) == queues
            by_map = producer.send(topic, b"map", shard=key)
            by_columns = producer.send_encoded([Outgoing(topic, b"columns", shard=key)])[0]
            assert by_map.ok and by_columns.ok
            assert (by_map.queue_id, by_columns.queue_id) == (rocketmq_queue, rocketmq_queue)
            wait_for(lambda t=topic, q=rocketmq_queue: admin.queue_info(t).get(q) == (0, 2), 30,
                     f"both sends in queue {rocketmq_queue} of {topic}")
            assert sum(hi - lo for lo, hi in admin.queue_info(topic).values()) == 2
