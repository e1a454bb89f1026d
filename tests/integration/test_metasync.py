"""Metadata follows the data: a master's front answers RocketMQ's metadata requests (checked against
hand-written RocketMQ layouts, not against the front's encoder), and a SLAVE's ``metasync`` actor,
started by the supervisor, takes the master's committed offsets in: forward only, never past its
own queue end.

The slave here has no HA stream yet: it holds the master's messages because the test sends them to
both brokers, each into the same queue."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Producer
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.wire.receipts import OK
from tests.integration.broker import Broker, free_port_range, wait_for

# a RocketMQ timercheck as the Java broker writes it: seven longs, then zeros to 4096 bytes
TIMER_LONGS = (1_700_000_001_000, 4096, 17, 15, 0, 1_700_000_000_123, 9)
# a RocketMQ 4 delayOffset.json: fastjson's unquoted level keys, no dataVersion
DELAY_TEXT = b'{\n\t"offsetTable":{1:5,3:2\n\t}\n}'
INTERVAL_MS = 200


def plant(store: Path) -> None:
    (store / "config").mkdir(parents=True)
    (store / "config" / "timercheck").write_bytes(struct.pack(">7q", *TIMER_LONGS).ljust(4096, b"\0"))
    (store / "config" / "delayOffset.json").write_bytes(DELAY_TEXT)


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    root = tmp_path_factory.mktemp("master")
    plant(root / "store")
    broker = Broker(root, remoting_port=free_port_range(1), extra_toml="\n[store]\ntimer_wheel_enable = false\n")
    with broker:
        yield broker


@pytest.fixture
def client(master: Broker) -> Iterator[rm.RemotingClient]:
    assert master.remoting_port is not None
    with rm.RemotingClient("127.0.0.1", master.remoting_port) as c:
        yield c


def send(broker: Broker, topic: str, queue_id: int, count: int) -> None:
    with Producer(broker.store) as producer:
        assert all(producer.send(topic, b"m%d" % i, queue_id=queue_id).ok for i in range(count))


def test_topics_whole_and_in_pages(master: Broker, client: rm.RemotingClient) -> None:
    send(master, "MetaA", 1, 1)
    send(master, "MetaB", 0, 1)
    entry = {"topicName": "MetaA", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
             "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}

    def both() -> dict[str, object] | None:
        reply = client.call(21)
        doc = json.loads(reply.body)
        return doc if reply.code == rm.SUCCESS and {"MetaA", "MetaB"} <= set(doc["topicConfigTable"]) else None
    doc = wait_for(both, 10, "both topics in the master's topics file")
    assert doc["topicConfigTable"]["MetaA"] == entry
    version = doc["dataVersion"]
    assert set(version) == {"stateVersion", "timestamp", "counter"} and version["counter"] >= 1
    assert doc["mappingDataVersion"] == {"stateVersion": 0, "timestamp": 0, "counter": 0}
    assert doc["topicQueueMappingDetailMap"] == {}
    total = len(doc["topicConfigTable"])

    # RocketMQ 5's pages: names in order, from topicSeq, while the dataVersion is the table's
    names = sorted(doc["topicConfigTable"])
    first = client.call(21, {"topicSeq": 0, "maxTopicNum": 1, "dataVersion": ""})
    assert first.ext["totalTopicNum"] == str(total)
    assert list(json.loads(first.body)["topicConfigTable"]) == names[:1]
    same = json.dumps(version, separators=(",", ":"))
    second = client.call(21, {"topicSeq": 1, "maxTopicNum": 1, "dataVersion": same})
    assert list(json.loads(second.body)["topicConfigTable"]) == names[1:2]
    stale = json.dumps({**version, "counter": version["counter"] + 100}, separators=(",", ":"))
    restarted = client.call(21, {"topicSeq": 1, "maxTopicNum": 1, "dataVersion": stale})
    assert list(json.loads(restarted.body)["topicConfigTable"]) == names[:1]


def test_consumer_offsets(master: Broker, client: rm.RemotingClient) -> None:
    send(master, "MetaC", 2, 5)
    wait_for(lambda: client.call(rm.GET_MAX_OFFSET, {"topic": "MetaC", "queueId": 2}).ext.get("offset") == "5",
             10, "5 messages in MetaC/2")
    assert client.call(rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "GC", "topic": "MetaC", "queueId": 2,
                                                   "commitOffset": 3}).code == rm.SUCCESS
    reply = client.call(43)
    assert reply.code == rm.SUCCESS
    doc = json.loads(reply.body)
    assert doc["offsetTable"]["MetaC@GC"] == {"2": 3}
    assert set(doc["dataVersion"]) == {"stateVersion", "timestamp", "counter"}


def test_delay_offsets_and_timer_checkpoint_as_on_disk(master: Broker, client: rm.RemotingClient) -> None:
    delay = client.call(45)
    # the scheduler took the planted RocketMQ 4 file in and wrote it again in RocketMQ 5's form
    assert delay.code == rm.SUCCESS and delay.body == (master.store / "config" / "delayOffset.json").read_bytes()
    # (the scheduler brought the planted offsets back to its empty schedule queues' ends)
    counter, stamp = re.fullmatch(rb'{\n\t"dataVersion":{\n\t\t"counter":(\d+),\n\t\t"stateVersion":0,\n\t\t'
                                  rb'"timestamp":(\d+)\n\t},\n\t"offsetTable":{.*}\n}', delay.body).groups()
    levels = ",".join(f"{level}:0" for level in range(1, 19))
    assert delay.body == (b'{\n\t"dataVersion":{\n\t\t"counter":%s,\n\t\t"stateVersion":0,\n\t\t"timestamp":%s\n\t},'
                          b'\n\t"offsetTable":{%s}\n}' % (counter, stamp, levels.encode()))
    timer = client.call(60)
    assert timer.code == rm.SUCCESS
    assert timer.body == struct.pack(">7q", *TIMER_LONGS)


def test_ack_marks(master: Broker, client: rm.RemotingClient) -> None:
    send(master, "MetaAck", 0, 4)
    with AckConsumer(master.store, group="GA", topic="MetaAck", visibility_ms=120_000) as consumer:
        got: list[object] = []
        wait_for(lambda: got.extend(consumer.receive(32, 200)) or len(got) >= 4, 20, "4 deliveries")
        assert consumer.ack(got[:2]) == [OK, OK]
        ordered = sorted(got, key=lambda d: d.queue_offset)
        assert consumer.ack([d for d in ordered if d.queue_offset < 2 and d not in got[:2]]) in ([], [OK], [OK, OK])
    reply = client.call(9001)
    assert reply.code == rm.SUCCESS
    table = json.loads(reply.body)["ackMarkTable"]
    assert "MetaAck@GA" in table and table["MetaAck@GA"]["0"] >= 0


def test_slave_takes_the_masters_offsets_forward_only_and_within_its_queue(
        master: Broker, client: rm.RemotingClient, tmp_path: Path) -> None:
    assert master.remoting_port is not None
    send(master, "MetaS", 1, 6)
    wait_for(lambda: client.call(rm.GET_MAX_OFFSET, {"topic": "MetaS", "queueId": 1}).ext.get("offset") == "6",
             10, "6 messages in MetaS/1")
    slave_port = free_port_range(1)
    slave = Broker(tmp_path, remoting_port=slave_port,
                   broker_extra='role = "SLAVE"\nbroker_id = 1',
                   extra_toml=f'\n[store]\ntimer_wheel_enable = false\n[ha]\nmaster_address = '
                              f'"127.0.0.1:{master.remoting_port + 1}"\nmetadata_sync_interval_ms = {INTERVAL_MS}\n')
    with slave, rm.RemotingClient("127.0.0.1", slave_port) as on_slave:
        send(slave, "MetaS", 1, 4)  # the slave holds 4 of the master's 6

        def slave_offset() -> int:
            reply = on_slave.call(rm.QUERY_CONSUMER_OFFSET, {"consumerGroup": "GS", "topic": "MetaS", "queueId": 1})
            return int(reply.ext["offset"]) if reply.code == rm.SUCCESS else -1

        assert client.call(rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "GS", "topic": "MetaS", "queueId": 1,
                                                       "commitOffset": 2}).code == rm.SUCCESS
        wait_for(lambda: slave_offset() == 2, 20, "the master's offset 2 on the slave")
        # the master past what the slave holds: held at the slave's end, and moved on once it has more
        client.call(rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "GS", "topic": "MetaS", "queueId": 1,
                                                "commitOffset": 6})
        wait_for(lambda: slave_offset() == 4, 20, "the offset held at the slave's queue end, 4")
        send(slave, "MetaS", 1, 2)
        wait_for(lambda: slave_offset() == 6, 20, "the master's offset 6 once the slave holds 6")
        # a consumer on the slave got further than the master says: the master's older offset never wins
        on_slave.call(rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "GT", "topic": "MetaS", "queueId": 1,
                                                  "commitOffset": 5})
        client.call(rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "GT", "topic": "MetaS", "queueId": 1,
                                                "commitOffset": 1})
        def metasync() -> dict[str, object]:
            stats: dict[str, object] = (slave.status() or {}).get("actors", {}).get("metasync", {})
            return stats
        rounds = int(metasync().get("rounds", 0))
        wait_for(lambda: int(metasync().get("rounds", 0)) >= rounds + 3, 20,
                 "three more sync rounds")
        reply = on_slave.call(rm.QUERY_CONSUMER_OFFSET, {"consumerGroup": "GT", "topic": "MetaS", "queueId": 1})
        assert reply.ext["offset"] == "5"
        # the timer checkpoint came with them: the master's read time, masterTimerQueueOffset and data
        # version, nothing enqueued here
        stats = metasync()
        assert [stats[item] for item in ("topics", "consumer_offsets", "delay_offsets", "timer_checkpoint",
                                         "ack_marks")] == ["ok"] * 5, stats
        assert stats["master"] == f"127.0.0.1:{master.remoting_port}"  # the HA port - 1
        assert stats["offsets_clamped"] and stats["last_sync_ms"] > 0
        head = struct.unpack(">7q", (slave.store / "config" / "timercheck").read_bytes()[:56])
        assert head[0] == TIMER_LONGS[0] and head[2] == 0 and head[3] == TIMER_LONGS[3] and head[4:] == TIMER_LONGS[4:]
