"""A master and a slave on this machine (separate stores, the HA port on loopback): the slave's
commitlog is the master's byte for byte, its own consume queues serve a consumer, it refuses sends
with a reason, and it catches up from its own end after a SIGKILL of its whole tree."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.ipc.client.api import Consumer, Producer
from tests.integration.broker import Broker, free_port_range, wait_for

COMMITLOG = 256 * 1024
TOPIC = "Replicated"


def master_broker(root: Path, ha_port: int) -> Broker:
    return Broker(root, commitlog=COMMITLOG, extra_toml=f"\n[ha]\nserve = true\nlisten_port = {ha_port}\n")


def slave_broker(root: Path, ha_port: int) -> Broker:
    broker = Broker(root, commitlog=COMMITLOG)
    broker.start_args += ("--role", "SLAVE", "--broker-id", "1", "--master", f"127.0.0.1:{ha_port}")
    return broker


def log_bytes(store: Path, end: int) -> bytes:
    data = bytearray()
    for path in sorted((store / "commitlog").iterdir()):
        if path.name.isdigit():
            data += path.read_bytes()
    return bytes(data[:end])


def ha_stats(broker: Broker) -> dict[str, object]:
    status = broker.status()
    return status["actors"]["ha"] if status is not None else {}


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Broker, Broker]]:
    ha_port = free_port_range(1)
    (tmp_path / "m").mkdir()
    (tmp_path / "s").mkdir()
    with master_broker(tmp_path / "m", ha_port) as master, slave_broker(tmp_path / "s", ha_port) as slave:
        yield master, slave


def send(master: Broker, count: int, start: int = 0) -> int:
    with Producer(master.store) as producer:
        for i in range(start, start + count):
            result = producer.send(TOPIC, f"m{i}".encode() * 300, queue_id=0)
            assert result.ok
    def written() -> int:
        status = master.status()
        end = int(status["written"]) if status is not None else 0
        return end if end > result.phys_offset else 0
    return int(wait_for(written, 30, "the master's writer to report its end"))


def caught_up(master: Broker, slave: Broker, end: int) -> None:
    wait_for(lambda: int(ha_stats(slave).get("written", -1)) >= end, 60, f"the slave to reach {end}")  # type: ignore[call-overload]
    assert log_bytes(slave.store, end) == log_bytes(master.store, end)


def test_the_slave_holds_the_masters_log_serves_reads_and_refuses_sends(pair: tuple[Broker, Broker]) -> None:
    master, slave = pair
    end = send(master, 300)  # past a file roll at this geometry
    assert end > COMMITLOG
    caught_up(master, slave, end)
    got: list[bytes] = []
    with Consumer(slave.store, group="G", topic=TOPIC, queues=[0], start="earliest") as consumer:
        deadline = time.monotonic() + 60
        while len(got) < 300 and time.monotonic() < deadline:
            got += [m.body for m in consumer.poll(200)]
    assert got == [f"m{i}".encode() * 300 for i in range(300)]
    with Producer(slave.store, retries=0) as producer:
        result = producer.send(TOPIC, b"no")
    assert result.status == "SERVICE_NOT_AVAILABLE" and "SLAVE" in (result.reason or "")
    stats = ha_stats(master)
    assert stats["connected"] == 1 and stats["slaves"][0]["broker_id"] == 1  # type: ignore[index]


def test_a_slave_killed_mid_stream_catches_up_from_its_own_end(pair: tuple[Broker, Broker]) -> None:
    master, slave = pair
    send(master, 100)
    slave.kill_tree()
    end = send(master, 200, start=100)
    slave.start()
    caught_up(master, slave, end)
    master.stop()
    master.start()
    end = send(master, 50, start=300)
    caught_up(master, slave, end)
