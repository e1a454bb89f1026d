"""Delay levels through a real broker: every level delivered no earlier than due, through mqstore's
Producer and the stock RocketMQ client; the stored bytes (the SCHEDULE_TOPIC_XXXX record, its
consume-queue tags code, the copy on the real topic); an encoded send carrying DELAY refused by the
writer; ``config/delayOffset.json`` in RocketMQ's format; ``verify`` clean.

Levels are short here (``[store] message_delay_level = "1s 2s 3s"``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.engine.consumequeue.consume_queue import ConsumeQueue
from mqstore.engine.delay.offsets import read_delay_offsets
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import SCHEDULE_TOPIC, Record
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.wire.messages import ReceivedMessage
from tests.integration.broker import Broker, free_port_range, wait_for

LEVELS = "1s 2s 3s"
DELAYS_MS = {1: 1000, 2: 2000, 3: 3000}
# the scheduler sleeps until the due time: a copy later than this means a level waited for
# something else (the next level's time, a lost wake-up); the bench measures the real lateness
GROSSLY_LATE_MS = 5000
ROOT = Path(__file__).resolve().parents[2]
DELAY_TOML = f'\n[store]\nmessage_delay_level = "{LEVELS}"\n'


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    port = free_port_range(1)
    with Broker(tmp_path_factory.mktemp("delay"), remoting_port=port, commitlog=1024 * 1024, cq=4096,
                extra_toml=DELAY_TOML) as running:
        yield running


def schedule_entry(store: Path, level: int, queue_offset: int) -> tuple[int, int, int, Record]:
    """The schedule queue's entry (phys offset, size, tags code) and its record, read off the files."""
    cq = ConsumeQueue.open(store / "consumequeue", SCHEDULE_TOPIC, level - 1, 4096, writable=False)
    commitlog = CommitLog.open(store / "commitlog", 1024 * 1024, writable=False)
    try:
        entry = cq.entry(queue_offset)
        assert entry is not None
        record = commitlog.read_record(entry[0]).record
        assert record is not None
        return (*entry, record)
    finally:
        cq.close()
        commitlog.close()


def consume(store: Path, topic: str, count: int, timeout_s: float = 30) -> list[ReceivedMessage]:
    got: list[ReceivedMessage] = []
    with Admin(store) as admin:  # every queue: a consumer takes the queues that hold messages when it starts
        queues = list(range(admin.topics()[topic]))
    with Consumer(store, group=f"C_{topic}", topic=topic, queues=queues, start="earliest") as consumer:
        deadline = time.monotonic() + timeout_s
        while len(got) < count and time.monotonic() < deadline:
            got += consumer.poll(200)
    assert len(got) == count, f"{len(got)} of {count} delayed messages delivered on {topic}"
    return got


def test_every_level_is_delivered_when_due_with_rocketmq_bytes(broker: Broker) -> None:
    sent: dict[bytes, tuple[int, int]] = {}
    with Producer(broker.store) as producer:
        for level in (1, 2, 3, 7):  # 7 is past the table: clamped to its last level
            body = f"level-{level}".encode()
            result = producer.send("Later", body, tags="T", keys=[f"k{level}"], properties={"DELAY": str(level)},
                                   queue_id=1)
            assert result.ok and result.queue_id == 1  # the queue it was sent to, as RocketMQ's reply says
            sent[body] = (min(level, 3), result.queue_offset)  # the offset in the schedule queue
        assert producer.send("Later", b"bad", properties={"DELAY": "x"}).status == "MESSAGE_ILLEGAL"
        assert producer.send("Later", b"now", properties={"DELAY": "0"}, queue_id=0).ok  # not delayed
    copies = {m.body: m for m in consume(broker.store, "Later", 5) if m.body != b"now"}
    assert set(copies) == set(sent)
    for body, (level, queue_offset) in sent.items():
        phys, size, tags_code, scheduled = schedule_entry(broker.store, level, queue_offset)
        # the schedule record: SCHEDULE_TOPIC_XXXX, queue level - 1, DELAY (clamped), REAL_TOPIC / REAL_QID
        assert (scheduled.topic, scheduled.queue_id, scheduled.body, scheduled.size) == (
            SCHEDULE_TOPIC, level - 1, body, size)
        props = scheduled.properties
        assert (props["DELAY"], props["REAL_TOPIC"], props["REAL_QID"], props["TAGS"]) == (
            str(level), "Later", "1", "T")
        assert tags_code == scheduled.store_ms + DELAYS_MS[level]  # the tags code is the delivery time
        copy = copies[body]
        # the copy: a new record on the real topic and queue, original fields, DELAY gone
        assert (copy.topic, copy.queue_id, copy.tags, copy.keys) == ("Later", 1, "T", scheduled.keys and
                                                                  tuple(scheduled.keys))
        assert copy.phys_offset > phys and copy.uniq_key == scheduled.uniq_key
        assert (copy.born_ms, copy.born_host, copy.reconsume_times, copy.flag) == (
            scheduled.born_ms, (scheduled.born_host.ip, scheduled.born_host.port), 0, 0)
        assert "DELAY" not in copy.properties
        assert (copy.properties["REAL_TOPIC"], copy.properties["REAL_QID"]) == ("Later", "1")
        assert copy.properties["DELAY_OFFSET"] == f"{level}:{queue_offset}"
        assert tags_code <= copy.store_ms < tags_code + GROSSLY_LATE_MS, "no earlier than due"


def test_stock_rocketmq_client_delay_time_level(broker: Broker) -> None:
    pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")
    from tests.integration.test_remoting import peer
    ns = f"127.0.0.1:{broker.remoting_port}"
    sent = peer(broker.root, "produce", ns, "StockLater", 20, "--delay-level", 2)
    assert [s["status"] for s in sent] == ["OK"] * 20
    copies = consume(broker.store, "StockLater", 20)
    assert sorted(m.body for m in copies) == sorted(f"body-{i}".encode() for i in range(20))
    for copy in copies:
        level, _, queue_offset = copy.properties["DELAY_OFFSET"].partition(":")
        assert level == "2"
        _, _, tags_code, scheduled = schedule_entry(broker.store, 2, int(queue_offset))
        assert scheduled.body == copy.body and scheduled.properties["REAL_TOPIC"] == "StockLater"
        assert tags_code == scheduled.store_ms + 2000 <= copy.store_ms


def test_delay_offsets_and_verify_after_a_stop(broker: Broker) -> None:
    def reported() -> bool:
        status = broker.status()
        return status is not None and status["actors"]["scheduler"].get("delivered", 0) > 0
    wait_for(reported, 30, "the scheduler's report")
    broker.stop()  # the scheduler saves its offsets as it stops
    raw = (broker.store / "config" / "delayOffset.json").read_bytes()
    assert b'"offsetTable":{1:' in raw  # fastjson's unquoted integer keys
    saved = read_delay_offsets(broker.store)
    for level in (1, 2, 3):
        cq = ConsumeQueue.open(broker.store / "consumequeue", SCHEDULE_TOPIC, level - 1, 4096, writable=False)
        try:
            assert saved.offsets[level] == cq.scan_valid_end()  # every entry delivered, none pending
        finally:
            cq.close()
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "verify", str(broker.store), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout.splitlines()[-1])["ok"], proc.stdout + proc.stderr
    broker.start()
