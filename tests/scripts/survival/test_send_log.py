"""The survival harnesses' logs (``mqstore.scripts.survival.send_log``) against a real broker with two readers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Producer
from mqstore.ipc.transport.channel import BrokerTimeoutError
from mqstore.ipc.wire.receipts import Delivery, ack_owner
from mqstore.scripts.survival.send_log import Logs, record_and_ack
from tests.integration.broker import Broker
from tests.integration.test_ack import receive_until

TOPIC = "Logged"
GROUP = "acks"
QUEUES = 4
PER_QUEUE = 8
LONG_MS = 120_000


def test_ack_batch_whose_ack_times_out_on_one_reader_is_still_logged_as_received(tmp_path: Path) -> None:
    """A batch from queues of both readers is acked while one reader is frozen: the other reader
    applies its acks, so those messages never come again, yet ``ack`` raises for the batch. The
    log must still hold every delivery, or the chaos verdict counts them as skipped by the index."""
    with Broker(tmp_path, readers=2) as broker:
        with Producer(broker.store) as producer:
            assert all(r.ok for r in producer.send_batch(
                [{"topic": TOPIC, "body": f"{q}-{i}".encode(), "queue_id": q}
                 for q in range(QUEUES) for i in range(PER_QUEUE)]))
        frozen = ack_owner(GROUP, TOPIC, 0, 2)
        frozen_queues = {q for q in range(QUEUES) if ack_owner(GROUP, TOPIC, q, 2) == frozen}
        assert 0 < len(frozen_queues) < QUEUES
        log_path = tmp_path / "ack-consumer.log"
        with AckConsumer(broker.store, group=GROUP, topic=TOPIC, visibility_ms=LONG_MS, timeout_ms=1000) as consumer:
            got = receive_until(consumer, QUEUES * PER_QUEUE)
            pid = broker.kill(f"reader-{frozen}", signal.SIGSTOP)
            try:
                with open(log_path, "a") as log, pytest.raises(BrokerTimeoutError):
                    record_and_ack(consumer, log, TOPIC, got)
            finally:
                os.kill(pid, signal.SIGCONT)
        logged = {(q, o) for _, q, o, _ in Logs.read([log_path]).ack_received}
        assert logged == {(d.queue_id, d.queue_offset) for d in got}

        # the reader that was not frozen applied its acks: its messages are not handed out again
        with AckConsumer(broker.store, group=GROUP, topic=TOPIC, visibility_ms=LONG_MS) as again:
            later: list[Delivery] = []
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                later += again.receive(1024, 300)
            assert {d.queue_id for d in later} <= frozen_queues
