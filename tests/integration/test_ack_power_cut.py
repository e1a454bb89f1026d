"""An ack-mode group across a power cut, through a real broker under ASYNC_FLUSH.

The flush service here flushes only when 64 pages wait, so the last messages stay in the page cache
while the ack-mode group receives and acks them and its queue index flushes them into its segment
files (the index's flush is durable: it fsyncs). The power cut: every process of the broker stopped
and killed at once, the commitlog's bytes past the last flush zeroed, ``abort`` left; the index keeps
every byte it wrote. After recovery the consume queue is shorter and new sends take the lost queue
offsets again, with the same sizes, at the commitlog offsets the lost ones had.
"""

from __future__ import annotations

import json
from pathlib import Path

from mqstore.engine.ackindex.low_water import QUEUE_INDEX_DIR
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Producer
from mqstore.ipc.wire.receipts import OK, Delivery
from tests.integration.broker import Broker, wait_for
from tests.integration.test_progress_after_flush import LARGE_BODY, LAZY_FLUSH, flush_watch, flushed_end
from tests.integration.test_timer_power_cut import power_cut, zero_after

LONG_MS = 120_000  # no visibility timeout during the test


def receive(consumer: AckConsumer, count: int) -> list[Delivery]:
    got: list[Delivery] = []
    wait_for(lambda: got.extend(consumer.receive(64, 200)) or len(got) >= count, 30, f"{count} deliveries")
    return got


def indexed_next_seq_id(store: Path) -> int:
    meta = store / QUEUE_INDEX_DIR / "G" / "Acked" / "0" / "queue_index.json"
    return int(json.loads(meta.read_bytes())["next_seq_id"]) if meta.exists() else 0


def test_an_ack_group_gets_every_message_sent_after_a_power_cut_at_the_lost_offsets(tmp_path: Path) -> None:
    broker = Broker(tmp_path, commitlog=1024 * 1024, cq=4096, broker_extra="ack_idle_flush_ms = 100")
    config = broker.root / "broker.toml"
    config.write_text(config.read_text().replace("[flush]\n", LAZY_FLUSH, 1))
    with broker, flush_watch(broker) as flushed, Producer(broker.store) as producer:
        durable = [producer.send("Acked", f"durable-{i}".encode(), queue_id=0) for i in range(5)]
        assert producer.send("Bulk", LARGE_BODY).ok  # the next flush round covers the durable ones
        wait_for(lambda: flushed_end(flushed) > durable[-1].phys_offset, 30, "the durable messages flushed")
        lost = [producer.send("Acked", f"lost!-{i}".encode(), queue_id=0) for i in range(5, 9)]
        assert [r.queue_offset for r in durable + lost] == list(range(9))
        with AckConsumer(broker.store, group="G", topic="Acked", queues=[0], visibility_ms=LONG_MS) as consumer:
            got = receive(consumer, 9)
            assert sorted(d.queue_offset for d in got) == list(range(9))
            assert consumer.ack([d for d in got if d.queue_offset in (0, 1, 5, 6)]) == [OK] * 4
            # the idle queue's index flushes into its segments: durable, and past the durable log
            wait_for(lambda: indexed_next_seq_id(broker.store) == 9, 30, "the index flushed to 9")
        cut = flushed_end(flushed)
        assert cut <= lost[0].phys_offset, "the flush moved without a large send"
        power_cut(broker)
    zero_after(broker.store / "commitlog", cut)
    assert (broker.store / "abort").exists()

    with broker, Producer(broker.store) as producer:
        # as many as were lost and one more, each as long as the lost one whose offsets it takes
        after = [producer.send("Acked", f"after-{i}".encode(), queue_id=0) for i in range(5)]
        assert [r.queue_offset for r in after] == [5, 6, 7, 8, 9]
        assert [r.phys_offset for r in after[:4]] == [r.phys_offset for r in lost]
        with AckConsumer(broker.store, group="G", topic="Acked", queues=[0], visibility_ms=LONG_MS) as consumer:
            got = receive(consumer, 8)
            assert sorted((d.queue_offset, d.body) for d in got) == \
                [(i, f"durable-{i}".encode()) for i in (2, 3, 4)] + [(i + 5, f"after-{i}".encode()) for i in range(5)]
            assert [d.redelivered for d in sorted(got, key=lambda d: d.queue_offset)] == [True] * 3 + [False] * 5
            assert consumer.ack(got) == [OK] * 8
            assert consumer.receive(64, 200) == []  # the lost ones are not due again
        assert broker.stop() == 0
    report = verify_store(broker.store)
    assert report.ok, report
