"""Producer-encoded sends through a real broker: what ``send_encoded`` stores is what ``send_batch``
would have stored, consumable, queryable and verified clean after the stop, in both flush modes and
across commitlog rolls; a batch that does not hold together is refused whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.verify import verify_store
from ipc.client import Admin, BrokerError, Consumer, Outgoing, Producer
from ipc.encoded import OP_SEND_ENCODED, EncodingError, request_fields
from tests.integration.broker import Broker, wait_for


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
                              keys=(f"key-{b}-{i}",) if i % 5 == 0 else (), queue=1 if i == 3 else None,
                              shard="order-9" if i == 4 else None) for i in range(60)]
            results = producer.send_encoded(batch)
            assert all(r.ok for r in results), results[:3]
            assert results[3].queue == 1
            sent.extend(zip(batch, results, strict=True))
        assert len({r.phys_offset for _, r in sent}) == len(sent)
        by_offset = {(r.queue, r.queue_offset): m for m, r in sent}
        received = _drain(broker.store, "Fast", len(sent))
        assert len(received) == len(sent)
        for msg in received:
            original = by_offset[(msg.queue, msg.queue_offset)]  # type: ignore[attr-defined]
            assert msg.body == original.body and msg.tags == original.tags  # type: ignore[attr-defined]
            assert msg.keys == original.keys  # type: ignore[attr-defined]
        with Admin(broker.store) as admin:
            found = admin.query_by_key("Fast", "key-7-10")
            assert [m.body for m in found] == [b"body-7-10" * 10]
            first = sent[0][1]
            assert admin.view_by_id(first.msg_id).body == sent[0][0].body  # type: ignore[union-attr]
            assert admin.query_by_uniq_key("Fast", first.uniq_key or "")
        assert broker.stop() == 0
    report = verify_store(broker.store)
    assert report.ok, report


def test_a_broken_batch_is_refused_whole_and_nothing_is_written(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker, Producer(broker.store) as producer:
        assert producer.send_encoded([Outgoing("Fast", b"first")])[0].ok
        encoder = producer._batch_encoder()
        batch = encoder.encode([Outgoing("Fast", b"x" * 50), Outgoing("Fast", b"y" * 50)])
        records = bytearray(batch.records)
        records[records.index(b"y" * 50) + 7] ^= 0xFF  # the second body: its CRC no longer matches
        with pytest.raises(BrokerError, match="MESSAGE_ILLEGAL"):
            producer._channel.call("ingress", OP_SEND_ENCODED, timeout_ms=3000, parts=(bytes(records),),
                                   **request_fields(batch)).result()
        with pytest.raises(EncodingError):
            producer.send_encoded([Outgoing("Fast", b"later", properties={"DELAY": "3"})])
        assert producer.send_encoded([Outgoing("Fast", b"after")])[0].queue_offset == 0  # queue 1: round robin
        with Admin(broker.store) as admin:
            wait_for(lambda: sum(hi - lo for lo, hi in admin.queue_info("Fast").values()) == 2, 30, "two stored")


def test_one_broken_request_in_a_round_is_refused_and_the_others_are_stored(tmp_path: Path) -> None:
    with Broker(tmp_path) as broker, Producer(broker.store) as producer:
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
        assert broker.stop() == 0
    assert verify_store(broker.store).ok
