"""A SYNC_MASTER and its slave on this machine (separate stores, the HA port on loopback). With no
slave in sync a send is SLAVE_NOT_AVAILABLE at once; with one it is SEND_OK only once the slave holds
it; with the slave's HA actor stopped it is FLUSH_SLAVE_TIMEOUT after ``[ha] slave_timeout_ms``. Each
status reaches the ipc Producer (map and encoded sends), a RocketMQ client through the remoting front
(codes 11 and 12, with the message's id) and ``mqstore produce``, and every such message is stored.
A send is consumable, as it is answered, only once flushed (under SYNC_FLUSH) and replicated. (The waiter's
finer cases, a notice just short of a send, a stale one, are unit tests.)"""

from __future__ import annotations

import signal
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from mqstore.engine.log.message import PutStatus
from mqstore.ipc.client.api import Admin, Consumer, Producer, SendResult
from mqstore.ipc.remoting import codec as rm
from tests.integration.broker import Broker, free_port_range, wait_for

TOPIC = "Replicated"


def master_broker(root: Path, ha_port: int, *, mode: str = "ASYNC_FLUSH", slave_timeout_ms: int = 3_000,
                  remoting_port: int | None = None) -> Broker:
    root.mkdir()
    return Broker(root, mode=mode, remoting_port=remoting_port,
                  extra_toml=f"\n[ha]\nlisten_port = {ha_port}\nslave_timeout_ms = {slave_timeout_ms}\n",
                  broker_extra='role = "SYNC_MASTER"\nstats_interval_ms = 50')  # the writer's word comes quickly


def slave_broker(root: Path, ha_port: int) -> Broker:
    root.mkdir()
    broker = Broker(root)
    broker.start_args += ("--role", "SLAVE", "--broker-id", "1", "--master", f"127.0.0.1:{ha_port}")
    return broker


def waits(broker: Broker) -> dict[str, Any]:
    """The writer's last report of its waits (the broker may be ready before the first one)."""
    def reported() -> dict[str, Any] | None:
        status = broker.status()
        writer = status["actors"].get("writer", {}) if status is not None else {}
        return dict(writer["waits"]) if "waits" in writer else None
    return wait_for(reported, 30, "the writer's report")  # type: ignore[no-any-return]


def flushed_all(broker: Broker) -> bool:
    """Whether the writer's last report has its whole log flushed."""
    status = broker.status()
    writer = status["actors"].get("writer", {}) if status is not None else {}
    return bool(writer.get("flushed", -1) >= writer.get("written", 0))


def slaves_in_sync(broker: Broker, count: int) -> None:
    def heard() -> bool:
        last = waits(broker)["replicated"]
        return last is not None and last["in_sync"] == count
    wait_for(heard, 60, f"the writer to hear of {count} slave(s) in sync")


def send(producer: Producer, i: int) -> Future[SendResult]:
    return producer.send_async(TOPIC, f"m-{i}".encode(), keys=[f"k-{i}"])


def send_ext() -> dict[str, Any]:
    return {"producerGroup": "PG", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
            "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0, "properties": "", "reconsumeTimes": 0,
            "unitMode": "false", "batch": "false"}


def slave_log(slave: Broker, phys_offset: int, size: int) -> bytes:
    data = bytearray()
    for path in sorted((slave.store / "commitlog").iterdir()):
        if path.name.isdigit():
            data += path.read_bytes()
    return bytes(data[phys_offset:phys_offset + size])


def test_a_sync_master_answers_by_its_slaves_copies(tmp_path: Path) -> None:
    ha_port, port = free_port_range(1), free_port_range(1)
    with master_broker(tmp_path / "m", ha_port, remoting_port=port) as master, \
            Producer(endpoints=master.endpoints(), timeout_ms=60_000) as producer, \
            rm.RemotingClient("127.0.0.1", port, timeout_s=30) as client:
        slaves_in_sync(master, 0)  # the HA actor serves, no slave connected
        alone = send(producer, 0).result()
        assert alone.status is PutStatus.SLAVE_NOT_AVAILABLE and alone.stored and alone.queue_offset >= 0
        unavailable = client.call(rm.SEND_MESSAGE, send_ext(), b"r-0")
        assert unavailable.code == rm.SLAVE_NOT_AVAILABLE == 11 and unavailable.ext["msgId"]
        run = master.mqstore("produce", "--topic", TOPIC, "--count", "2", "--queue", "3")
        assert run.returncode == 1 and "0 sent, 0 failed, 2 SLAVE_NOT_AVAILABLE" in run.stderr, run.stderr

        with slave_broker(tmp_path / "s", ha_port) as slave:
            slaves_in_sync(master, 1)
            copied = send(producer, 1).result()
            assert copied.status is PutStatus.PUT_OK
            assert b"m-1" in slave_log(slave, copied.phys_offset, 512)  # the slave held it before SEND_OK

            slave.kill("ha", signal.SIGSTOP)  # in sync by its last report, silent from now on
            try:
                late = send(producer, 2)
                encoded = producer.send_encoded_async([{"topic": TOPIC, "body": b"m-3", "keys": ["k-3"]}])
                timed_out = client.call(rm.SEND_MESSAGE, send_ext(), b"r-1")
                assert timed_out.code == rm.FLUSH_SLAVE_TIMEOUT == 12 and timed_out.ext["msgId"]
                assert late.result(30).status is PutStatus.FLUSH_SLAVE_TIMEOUT and late.result().stored
                assert encoded.result(30).written_status == "FLUSH_SLAVE_TIMEOUT"
            finally:
                slave.kill("ha", signal.SIGCONT)
        def answered_all() -> bool:  # answers, not messages: produce's batch of 2 is one
            answered = waits(master)["answered_as"]  # the writer reports what moved within a stats interval
            return answered.get("FLUSH_SLAVE_TIMEOUT", 0) >= 3 and answered.get("SLAVE_NOT_AVAILABLE", 0) >= 3
        wait_for(answered_all, 30, "the writer's report of every answer")
        with Consumer(master.store, group="all", topic=TOPIC, start="earliest") as consumer:
            bodies: set[bytes] = set()
            wait_for(lambda: bodies.update(m.body for m in consumer.poll(200)) or len(bodies) >= 8, 30,
                     "every message answered, whatever its status, to be consumable")
        assert {b"m-0", b"m-1", b"m-2", b"m-3", b"r-0", b"r-1"} <= bodies


def test_under_sync_flush_a_send_is_consumable_and_answered_only_once_flushed_and_replicated(tmp_path: Path) -> None:
    """The builders wait for the copies as the answer does: a record only the master holds is never
    read (a group's offset past it would skip the SEND_OK a promoted slave gives that queue offset)."""
    ha_port = free_port_range(1)
    with master_broker(tmp_path / "m", ha_port, mode="SYNC_FLUSH", slave_timeout_ms=30_000) as master, \
            slave_broker(tmp_path / "s", ha_port) as slave:
        slaves_in_sync(master, 1)
        with Admin(endpoints=master.endpoints()) as admin:
            admin.create_topic(TOPIC, 1)
        with Producer(endpoints=master.endpoints(), timeout_ms=60_000) as producer, \
                Consumer(endpoints=master.endpoints(), group="g", topic=TOPIC, start="earliest") as consumer:
            slave.kill("ha", signal.SIGSTOP)
            try:
                waiting = send(producer, 0)
                wait_for(lambda: waits(master)["pending_replicas"] == 1, 30, "the writer to report the wait")
                wait_for(lambda: flushed_all(master), 30, "the send to be flushed")
                assert consumer.poll(500) == [] and not waiting.done()  # flushed, not replicated: not visible
            finally:
                slave.kill("ha", signal.SIGCONT)
            assert waiting.result(30).status is PutStatus.PUT_OK
            replicated = wait_for(lambda: consumer.poll(200), 30, "the send to be consumable once replicated")
            assert [m.body for m in replicated] == [b"m-0"]
