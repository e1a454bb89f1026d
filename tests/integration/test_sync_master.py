"""A SYNC_MASTER broker whose HA actor this test plays: it binds the PUB on ``endpoints.replicated``
and publishes ``Replicated`` notices. A send is answered SEND_OK only once a notice's end covers it
(one just short leaves it waiting), FLUSH_SLAVE_TIMEOUT when none does within ``[ha]
slave_timeout_ms``, SLAVE_NOT_AVAILABLE at once when no slave is in sync; each status reaches the
ipc Producer (map and encoded sends), a RocketMQ client through the remoting front (codes 11 and
12, the message's id with them) and ``mqstore produce``; every such message is stored."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.engine.log.message import PutStatus
from mqstore.ipc.client.api import Admin, Consumer, Producer, SendResult
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.transport.sockets import bind
from mqstore.ipc.wire.notices import Replicated
from tests.integration.broker import Broker, free_port_range, wait_for

SLAVE_TIMEOUT_MS = 5_000  # long enough for the test to publish a notice and see it heard
HA_TOML = f"\n[ha]\nserve = true\nslave_timeout_ms = {SLAVE_TIMEOUT_MS}\n"


class FakeHa:
    """The master's HA actor as the writer hears it: ``Replicated`` notices on ``endpoints.replicated``."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.pub = bind(self.ctx, zmq.PUB, Endpoints.for_store(broker.store).replicated)

    def writer(self) -> dict[str, Any]:
        """The writer's last report (the broker may be ready before the first one)."""
        def reported() -> dict[str, Any] | None:
            status = self.broker.status()
            writer = status["actors"]["writer"] if status is not None else {}
            return dict(writer) if "waits" in writer else None
        return wait_for(reported, 30, "the writer's report")  # type: ignore[no-any-return]

    def say(self, end: int, in_sync: int = 1) -> None:
        """Publish until the writer reports it heard this notice (PUB/SUB drops what comes before the
        writer's connection)."""
        def heard() -> bool:
            self.pub.send_multipart(Replicated(end, in_sync, 1, 7).frames())
            last = self.writer()["waits"]["replicated"]
            return last is not None and (last["end"], last["in_sync"]) == (end, in_sync)
        wait_for(heard, 30, f"the writer to hear replicated end={end} in_sync={in_sync}", interval_s=0.05)

    def close(self) -> None:
        self.pub.close(linger=0)
        self.ctx.term()


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, FakeHa, int]]:
    port = free_port_range(1)
    broker = Broker(tmp_path_factory.mktemp("sync-master"), remoting_port=port, extra_toml=HA_TOML,
                    broker_extra='role = "SYNC_MASTER"\nstats_interval_ms = 50')  # the writer's word comes quickly
    with broker:
        ha = FakeHa(broker)
        try:
            yield broker, ha, port
        finally:
            ha.close()


def _send(producer: Producer, i: int) -> Future[SendResult]:
    return producer.send_async("Replicated", f"m-{i}".encode(), keys=[f"k-{i}"])


def test_a_send_waits_for_the_notice_that_covers_it_and_times_out_without_one(
        master: tuple[Broker, FakeHa, int]) -> None:
    broker, ha, _ = master
    with Producer(endpoints=broker.endpoints(), timeout_ms=60_000) as producer:
        unheard = _send(producer, 0).result()  # no HA actor has spoken: no slave is in sync
        assert unheard.status is PutStatus.SLAVE_NOT_AVAILABLE and unheard.stored and unheard.queue_offset == 0
        ha.say(ha.writer()["written"])

        waiting = _send(producer, 1)
        wait_for(lambda: ha.writer()["waits"]["pending_replicas"] == 1, 30, "the send to wait for the copies")
        end = ha.writer()["written"]
        ha.say(end - 1)  # one byte short of the send's end: never SEND_OK
        assert not waiting.done() and ha.writer()["waits"]["pending_replicas"] == 1
        ha.say(end)
        covered = waiting.result(30)
        assert covered.status is PutStatus.PUT_OK and covered.phys_offset + 1 <= end

        late = _send(producer, 2)
        encoded = producer.send_encoded_async([{"topic": "Replicated", "body": b"m-3", "keys": ["k-3"]}])
        timed_out = late.result(30)
        assert timed_out.status is PutStatus.FLUSH_SLAVE_TIMEOUT and timed_out.stored
        assert encoded.result(30).written_status == "FLUSH_SLAVE_TIMEOUT"
    answered = wait_for(lambda: ha.writer()["waits"]["answered_as"].get("FLUSH_SLAVE_TIMEOUT", 0) >= 2, 30,
                        "the writer to count its slave timeouts")
    assert answered
    stats = ha.writer()["waits"]
    assert stats["answered_as"]["SLAVE_NOT_AVAILABLE"] >= 1 and stats["replicated"]["epoch"] == 7
    with Consumer(endpoints=broker.endpoints(), group="all", topic="Replicated", start="earliest") as consumer:
        bodies: set[bytes] = set()
        wait_for(lambda: bodies.update(m.body for m in consumer.poll(200)) or len(bodies) >= 4, 30,
                 "every message answered, whatever its status, to be consumable")
    assert {b"m-0", b"m-1", b"m-2", b"m-3"} <= bodies


def test_rocketmq_clients_and_mqstore_produce_see_the_statuses(master: tuple[Broker, FakeHa, int]) -> None:
    broker, ha, port = master
    ha.say(ha.writer()["written"], in_sync=0)  # a slave connected, too far behind
    ext = {"producerGroup": "PG", "topic": "Replicated", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
           "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0, "properties": "", "reconsumeTimes": 0,
           "unitMode": "false", "batch": "false"}
    with rm.RemotingClient("127.0.0.1", port, timeout_s=30) as client:
        unavailable = client.call(rm.SEND_MESSAGE, ext, b"r-0")
        assert unavailable.code == rm.SLAVE_NOT_AVAILABLE == 11 and unavailable.ext["msgId"]
        run = broker.mqstore("produce", "--topic", "Replicated", "--count", "2", "--queue", "3")
        assert run.returncode == 1 and "0 sent, 0 failed, 2 SLAVE_NOT_AVAILABLE" in run.stderr, run.stderr
        ha.say(ha.writer()["written"], in_sync=1)
        timed_out = client.call(rm.SEND_MESSAGE, ext, b"r-1")
        assert timed_out.code == rm.FLUSH_SLAVE_TIMEOUT == 12 and timed_out.ext["msgId"]
        assert timed_out.ext["queueOffset"] == str(int(unavailable.ext["queueOffset"]) + 1)


def test_under_sync_flush_a_send_is_consumable_once_flushed_and_answered_once_replicated(tmp_path: Path) -> None:
    """The builders wait for the flush alone; the answer for the flush and the copies."""
    with Broker(tmp_path, mode="SYNC_FLUSH", extra_toml=HA_TOML,
                broker_extra='role = "SYNC_MASTER"\nstats_interval_ms = 50') as broker:
        ha = FakeHa(broker)
        try:
            ha.say(0)
            with Admin(endpoints=broker.endpoints()) as admin:
                admin.create_topic("Replicated", 1)
            with Producer(endpoints=broker.endpoints(), timeout_ms=60_000) as producer, \
                    Consumer(endpoints=broker.endpoints(), group="g", topic="Replicated", start="earliest") as consumer:
                waiting = _send(producer, 0)
                flushed = wait_for(lambda: consumer.poll(200), 30, "the send to be consumable, flushed, not replicated")
                assert [m.body for m in flushed] == [b"m-0"]
                wait_for(lambda: ha.writer()["waits"]["pending_replicas"] == 1, 30, "the writer to report the wait")
                assert not waiting.done()
                ha.say(ha.writer()["written"])
                assert waiting.result(30).status is PutStatus.PUT_OK
        finally:
            ha.close()
