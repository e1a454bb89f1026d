"""Ack mode through a real broker (two readers): receipts, acks surviving a restart and a SIGKILL of
the owning readers, visibility timeouts, nack, the DLQ, competing consumers, and hostile ack ops.

One broker serves the module (each test has its own topic and group): ``ack_visibility_timeout_ms``
is short in its TOML, so tests that must not see a timeout ask for a long one per consumer.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.receipts import NOT_OWNER, OK, UNKNOWN_RECEIPT, Delivery, ack_owner, dlq_topic
from tests.integration.broker import Broker, wait_for

VISIBILITY_MS = 800
RETRY_DELAY_MS = 1000  # level 3 of the short table below: a failed delivery's wait
LONG_MS = 120_000
READERS = 2
BROKER_EXTRA = f"""ack_visibility_timeout_ms = {VISIBILITY_MS}
ack_max_deliveries = 3
ack_prefetch = 4096
ack_max_journal_entries = 1000
ack_idle_flush_ms = 200"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("ack"), readers=READERS, broker_extra=BROKER_EXTRA,
                extra_toml='\n[store]\nmessage_delay_level = "1s 1s 1s 2s"\n') as running:
        yield running


def produce(broker: Broker, topic: str, count: int, *, queue: int | None = None) -> None:
    with Producer(broker.store) as producer:
        for start in range(0, count, 500):
            batch = [{"topic": topic, "body": f"{topic}-{i}".encode(), "tags": "T", "queue_id": queue}
                     for i in range(start, min(count, start + 500))]
            assert all(r.ok for r in producer.send_batch(batch))


def receive_until(consumer: AckConsumer, count: int, timeout_s: float = 30) -> list[Delivery]:
    got: list[Delivery] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"received {len(got)} of {count}"
        got += consumer.receive(1024, 500)
    return got


def positions(deliveries: list[Delivery]) -> list[tuple[int, int]]:
    return [(d.receipt.queue_id, d.receipt.seq) for d in deliveries]


def dead_letters(broker: Broker, group: str, expected: int, timeout_s: float = 15) -> list[Any]:
    got: list[Any] = []
    with Consumer(broker.store, group="dlq-reader", topic=dlq_topic(group), start="earliest", queues=[0],
                  auto_commit=False, long_poll_ms=200) as consumer:
        deadline = time.monotonic() + timeout_s
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(500)
        got += consumer.poll(300)  # and nothing more
    return got


def test_ack_2000_then_restart_nothing_acked_comes_back(broker: Broker) -> None:
    produce(broker, "Acked", 2000)
    with AckConsumer(broker.store, group="G1", topic="Acked", visibility_ms=LONG_MS) as consumer:
        assert len(consumer.queues) == 4
        got = receive_until(consumer, 2000)
        assert all(consumer.ack(got[i:i + 300]) == [OK] * len(got[i:i + 300]) for i in range(0, 2000, 300))
    assert sorted(positions(got)) == sorted((q, s) for q in range(4) for s in range(500))
    assert all(not d.redelivered and d.delivery_count == 1 and d.body == f"Acked-{d.queue_offset * 4 + d.queue_id}"
               .encode() for d in got)
    assert broker.stop() == 0
    broker.start()
    produce(broker, "Acked", 8)
    with AckConsumer(broker.store, group="G1", topic="Acked", visibility_ms=LONG_MS) as consumer:
        after = receive_until(consumer, 8)
        assert consumer.receive(1024, 1000) == []
        assert consumer.ack(after) == [OK] * 8
    assert sorted(positions(after)) == [(q, s) for q in range(4) for s in (500, 501)]


def test_sigkill_owning_readers_with_thousands_unacked(broker: Broker) -> None:
    group = "G2"
    # both readers own a share of the group's queues, so both die with deliveries out
    assert {ack_owner(group, "Kill", q, READERS) for q in range(4)} == set(range(READERS))
    produce(broker, "Kill", 5000)
    with AckConsumer(broker.store, group=group, topic="Kill", visibility_ms=LONG_MS) as first:
        got = receive_until(first, 5000)
        acked = [d for d in got if d.receipt.seq % 5 < 2]
        assert first.ack(acked) == [OK] * len(acked)
    unacked = set(positions(got)) - set(positions(acked))
    assert len(unacked) == 3000
    for reader in range(READERS):
        old = broker.kill(f"reader-{reader}")
        broker.wait_restarted(f"reader-{reader}", old)
    with AckConsumer(broker.store, group=group, topic="Kill", visibility_ms=LONG_MS) as second:
        again = receive_until(second, 3000)
        assert second.receive(1024, 1000) == []
        assert second.ack(again) == [OK] * 3000
        assert second.ack(acked[:10]) == [UNKNOWN_RECEIPT] * 10  # acked before the kill, still acked
    assert set(positions(again)) == unacked and len(again) == 3000
    assert all(d.redelivered and d.delivery_count == 2 for d in again)
    assert set(positions(acked)) | set(positions(again)) == {(q, s) for q in range(4) for s in range(1250)}


def test_visibility_timeout_hands_the_message_out_again(broker: Broker) -> None:
    produce(broker, "Vis", 1, queue=0)
    with AckConsumer(broker.store, group="G3", topic="Vis", queues=[0]) as consumer:
        [first] = receive_until(consumer, 1)
        taken_at = time.monotonic()
        assert (first.redelivered, first.delivery_count) == (False, 1)
        [second] = receive_until(consumer, 1, timeout_s=10)
        # the timeout, then the delay of level 3 (RocketMQ's first retry)
        assert time.monotonic() - taken_at >= (VISIBILITY_MS + RETRY_DELAY_MS) / 1000 * 0.9
        assert second.receipt == first.receipt and second.body == first.body
        assert (second.redelivered, second.delivery_count) == (True, 2)
        assert consumer.ack(second) == [OK]
        assert consumer.ack(first) == [UNKNOWN_RECEIPT]  # the same message: acked already
        assert consumer.receive(10, 2 * VISIBILITY_MS) == []


def test_nack_requeue_and_nack_to_the_dead_letter_queue(broker: Broker) -> None:
    produce(broker, "Nack", 2, queue=0)
    with AckConsumer(broker.store, group="G4", topic="Nack", queues=[0], visibility_ms=LONG_MS) as consumer:
        keep, poison = sorted(receive_until(consumer, 2), key=lambda d: d.receipt.seq)
        nacked_at = time.monotonic()
        assert consumer.nack(keep, requeue=True) == [OK]
        [back] = receive_until(consumer, 1, timeout_s=5)  # long before any visibility timeout
        assert time.monotonic() - nacked_at >= RETRY_DELAY_MS / 1000 * 0.9  # after level 3's delay
        assert back.receipt == keep.receipt and (back.redelivered, back.delivery_count) == (True, 2)
        assert consumer.nack(poison, requeue=False) == [OK]
        assert consumer.ack(back) == [OK]
        assert consumer.receive(10, 1000) == []
        assert consumer.ack(poison) == [UNKNOWN_RECEIPT]
    [dead] = dead_letters(broker, "G4", 1)
    assert dead.body == poison.body and dead.tags == "T"
    assert dead.properties["ORIGIN_TOPIC"] == "Nack" and dead.properties["ORIGIN_QUEUE"] == "0"
    assert dead.properties["ORIGIN_OFFSET"] == str(poison.receipt.seq)
    assert dead.properties["ORIGIN_MESSAGE_ID"] == poison.msg_id and dead.reconsume_times == 1


def test_close_gives_back_at_once_counting_only_what_was_read(broker: Broker) -> None:
    produce(broker, "Leave", 2, queue=0)
    with Admin(broker.store) as admin:  # both consumable, so the first pull brings both
        wait_for(lambda: admin.queue_info("Leave")[0] == (0, 2), 10, "both messages to be consumable")
    with AckConsumer(broker.store, group="G8", topic="Leave", queues=[0], visibility_ms=LONG_MS) as first:
        [read] = first.receive(1, 5000)  # the other one stays in the client, never handed out
    with AckConsumer(broker.store, group="G8", topic="Leave", queues=[0], visibility_ms=LONG_MS) as second:
        back = sorted(receive_until(second, 2, timeout_s=5), key=lambda d: d.receipt.seq)  # no timeout waited
        assert second.ack(back) == [OK, OK]
    assert [(d.receipt.seq, d.redelivered, d.delivery_count) for d in back] == [(0, True, 2), (1, True, 1)]
    assert read.receipt.seq == 0


def test_max_deliveries_sends_a_never_acked_message_to_the_dlq_once(broker: Broker) -> None:
    produce(broker, "Poison", 1, queue=0)
    counts: list[int] = []
    with AckConsumer(broker.store, group="G5", topic="Poison", queues=[0]) as consumer:
        deadline = time.monotonic() + 20
        while len(counts) < 3:
            assert time.monotonic() < deadline, f"deliveries so far: {counts}"
            counts += [d.delivery_count for d in consumer.receive(10, 500)]  # never acked
        assert consumer.receive(10, 3 * VISIBILITY_MS) == []  # a 4th would exceed ack_max_deliveries
    assert counts == [1, 2, 3]
    [dead] = dead_letters(broker, "G5", 1)
    assert dead.body == b"Poison-0" and dead.properties["RECONSUME_TIMES"] == "3" and dead.reconsume_times == 3


def test_competing_consumers_never_share_a_message(broker: Broker) -> None:
    total, prefetch = 1200, 8
    produce(broker, "Compete", total)
    held: set[tuple[int, int]] = set()
    acked: Counter[tuple[int, int]] = Counter()
    per_consumer: Counter[str] = Counter()
    lock = threading.Lock()
    failures: list[str] = []

    def work(name: str) -> None:
        with AckConsumer(broker.store, group="G6", topic="Compete", consumer_id=name, prefetch=prefetch,
                         visibility_ms=LONG_MS, long_poll_ms=200) as consumer:
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                with lock:
                    if sum(acked.values()) >= total or failures:
                        return
                batch = consumer.receive(64, 300)
                by_queue = Counter(d.receipt.queue_id for d in batch)
                with lock:
                    if any(n > prefetch for n in by_queue.values()):
                        failures.append(f"{name} holds {by_queue} unacked, prefetch is {prefetch}")
                    for position in positions(batch):
                        if position in held:
                            failures.append(f"{position} handed to two consumers at once")
                        held.add(position)
                time.sleep(0.002)  # "processing", while the other consumer pulls
                statuses = consumer.ack(batch)
                with lock:
                    held.difference_update(positions(batch))
                    acked.update(p for p, s in zip(positions(batch), statuses, strict=True) if s == OK)
                    per_consumer[name] += len(batch)

    threads = [threading.Thread(target=work, args=(f"consumer-{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures[:5]
    assert set(acked) == {(q, s) for q in range(4) for s in range(total // 4)}
    assert set(acked.values()) == {1}
    assert min(per_consumer.values()) > 0 and len(per_consumer) == 2, per_consumer


def test_bad_ack_ops_get_statuses_and_the_reader_still_serves(broker: Broker) -> None:
    produce(broker, "Bad", 4)
    ep = Endpoints.for_store(broker.store, READERS)
    ctx: zmq.Context[Any] = zmq.Context()

    def call(reader: int, op: str, **fields: Any) -> dict[str, Any]:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(ep.reader(reader))
        try:
            sock.send(schema.pack(schema.request(op, 7, **fields)))
            assert sock.poll(5000), f"no reply to {op} {fields}"
            return schema.unpack(sock.recv())
        finally:
            sock.close()

    try:
        owner = ack_owner("G7", "Bad", 0, READERS)
        other = 1 - owner
        pulled = call(owner, "ack_pull", group="G7", topic="Bad", queue=0, consumer="c", max=1, wait_ms=4000)
        assert pulled["ok"] and len(pulled["msgs"]) == 1
        seq = pulled["msgs"][0]["seq"]
        refused = call(other, "ack_pull", group="G7", topic="Bad", queue=0, consumer="c", max=1)
        assert (refused["ok"], refused["status"]) == (False, NOT_OWNER)
        nowhere = next(q for q in range(64) if ack_owner("G7", "Nowhere", q, READERS) == owner)
        reply = call(owner, "ack", receipts=[
            ["G7", "Bad", 0, 10**9],          # never delivered
            ["G7", "Bad", 0, seq],            # fine
            ["G7", "Bad", 0, seq],            # acked a moment ago
            ["G7", "Nowhere", nowhere, 0],    # no such index: nothing was ever delivered there
            ["G7", "Bad", 0], "x", ["G7", "Bad", -1, 0], ["../G7", "Bad", 0, 0], ["G7", "Bad", 0, True],
        ])
        assert reply["ok"] and reply["results"] == [UNKNOWN_RECEIPT, OK, UNKNOWN_RECEIPT, UNKNOWN_RECEIPT,
                                                    *["BAD_REQUEST"] * 5]
        foreign = next(q for q in range(64) if ack_owner("G7", "Bad", q, READERS) == other)
        assert call(owner, "nack", receipts=[["G7", "Bad", foreign, 0]])["results"] == [NOT_OWNER]
        left = call(owner, "ack_release", group="G7", topic="Bad", consumer="c", queues=[0, foreign])
        assert (left["ok"], left["status"]) == (False, NOT_OWNER)
        for op, fields in (("ack", {"receipts": "all"}), ("ack", {}), ("nack", {"receipts": [], "requeue": 1}),
                           ("ack_pull", {"group": "G7", "topic": "Bad", "queue": 0}),
                           ("ack_pull", {"group": "a/b", "topic": "Bad", "queue": 0, "consumer": "c"}),
                           ("ack_pull", {"group": "G7", "topic": "Bad", "queue": 0, "consumer": "c", "max": 0}),
                           ("ack_release", {"group": "G7", "topic": "Bad", "consumer": "c", "queues": ["0"]}),
                           ("ack_release", {"group": "G7", "topic": "Bad", "consumer": "c", "queues": [0],
                                            "read": [[0]]})):
            bad = call(owner, op, **fields)
            assert (bad["ok"], bad["status"]) == (False, "BAD_REQUEST"), (op, fields, bad)
        assert call(owner, "ping")["ok"]
        more = call(owner, "ack_pull", group="G7", topic="Bad", queue=0, consumer="c", max=8, wait_ms=0)
        assert more["ok"] and more["msgs"] == []  # queue 0 of "Bad" had one message, now acked
    finally:
        ctx.destroy(linger=0)
    wait_for(lambda: broker.status() is not None, 5, "the broker to answer")


def test_keep_unacked_holds_retention_back_until_acked(tmp_path: Path) -> None:
    """With ``keep_unacked`` a commitlog file holding a message an ack-mode group has not acked is
    never deleted, however old; once acked, retention takes it."""
    hours = ";".join(str(h) for h in range(24))
    broker = Broker(tmp_path, commitlog=64 * 1024, broker_extra="clean_interval_ms = 100",
                    extra_toml=f'\n[retention]\nfile_reserved_hours = 0\ndelete_when = "{hours}"\n'
                               "keep_unacked = true\n")
    first_file = broker.store / "commitlog" / f"{0:020d}"
    with broker, Producer(broker.store) as producer:
        assert all(r.ok for r in producer.send_batch([{"topic": "Kept", "body": bytes(1024), "queue_id": 0}] * 5))
        with AckConsumer(broker.store, group="G", topic="Kept", queues=[0], visibility_ms=60_000) as consumer:
            held = consumer.receive(5, timeout_ms=10_000)
            assert held and held[0].queue_offset == 0
            mark = broker.store / "queueindex" / "lowwater-0.json"
            wait_for(lambda: mark.exists() and b'"phys_offset": 0' in mark.read_bytes(), 20, "the low-water mark")
            for _ in range(4):  # the first file is now old and not the newest: only the veto keeps it
                assert all(r.ok for r in producer.send_batch(
                    [{"topic": "Kept", "body": bytes(1024), "queue_id": 0}] * 50))
            for _ in range(30):  # a few cleanup rounds pass: the oldest file must survive every one
                assert first_file.exists()
                producer.send("Kept", bytes(1024), queue_id=0)
            assert first_file.exists()
            consumer.ack(held)
            rest = consumer.receive(500, timeout_ms=2000)
            while rest:
                consumer.ack(rest)
                rest = consumer.receive(500, timeout_ms=1000)
        wait_for(lambda: not first_file.exists(), 30, "retention to delete the file once acked")
        assert broker.stop() == 0
