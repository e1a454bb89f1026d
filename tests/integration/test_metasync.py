"""Metadata follows the data: a master's front answers RocketMQ's metadata requests (checked against
hand-written RocketMQ layouts, not against the front's encoder), and a real SLAVE (``[broker] role =
"SLAVE"``, its messages by replication from the master's HA port) takes the master's metadata in
through its ``metasync`` actor: committed offsets and ack-mode marks forward only and never past its
own queue end (held there while its HA actor is stopped), topics into its topics.json, delay offsets
into its delayOffset.json, the timer checkpoint into its timercheck."""

from __future__ import annotations

import json
import re
import signal
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine.delay.offsets import read_delay_offsets
from mqstore.engine.meta.topics import read_topic_file
from mqstore.ipc.client.ack_consumer import AckConsumer, Delivery
from mqstore.ipc.client.api import Admin, Producer
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
    port = free_port_range(2)  # the front, and the HA port next to it as a slave expects (RocketMQ's)
    broker = Broker(root, remoting_port=port, extra_toml=f"\n[store]\ntimer_wheel_enable = false\n"
                                                         f"[ha]\nserve = true\nlisten_port = {port + 1}\n")
    with broker:
        yield broker


@pytest.fixture(scope="module")
def slave(master: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    assert master.remoting_port is not None
    broker = Broker(tmp_path_factory.mktemp("slave"), remoting_port=free_port_range(1),
                    broker_extra='role = "SLAVE"\nbroker_id = 1',
                    extra_toml=f'\n[store]\ntimer_wheel_enable = false\n[ha]\nmaster_address = '
                               f'"127.0.0.1:{master.remoting_port + 1}"\nmetadata_sync_interval_ms = {INTERVAL_MS}\n')
    with broker:
        yield broker


@pytest.fixture
def on_slave(slave: Broker) -> Iterator[rm.RemotingClient]:
    assert slave.remoting_port is not None
    with rm.RemotingClient("127.0.0.1", slave.remoting_port) as c:
        yield c


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


def max_offset(client: rm.RemotingClient, topic: str, queue_id: int) -> int:
    reply = client.call(rm.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
    return int(reply.ext["offset"]) if reply.code == rm.SUCCESS else -1


def committed(client: rm.RemotingClient, group: str, topic: str, queue_id: int) -> int:
    reply = client.call(rm.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": queue_id})
    return int(reply.ext["offset"]) if reply.code == rm.SUCCESS else -1


def commit(client: rm.RemotingClient, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
    reply = client.call(rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": queue_id,
                                                    "commitOffset": queue_offset})
    assert reply.code == rm.SUCCESS, reply.remark


def ack_mark(client: rm.RemotingClient, group: str, topic: str, queue_id: int) -> int:
    reply = client.call(9001)
    assert reply.code == rm.SUCCESS
    return int(json.loads(reply.body)["ackMarkTable"].get(f"{topic}@{group}", {}).get(str(queue_id), -1))


def metasync(slave: Broker) -> dict[str, Any]:
    """The slave's metasync stats, once it reported a round."""
    def reported() -> dict[str, Any] | None:
        stats: dict[str, Any] = (slave.status() or {}).get("actors", {}).get("metasync", {})
        return stats if "rounds" in stats else None
    return wait_for(reported, 20, "the slave's metasync stats")  # type: ignore[no-any-return]


def replicated(on_slave: rm.RemotingClient, topic: str, queue_id: int, count: int) -> None:
    wait_for(lambda: max_offset(on_slave, topic, queue_id) == count, 60,
             f"the slave's {topic}/{queue_id} to hold {count} messages, replicated")


@contextmanager
def ha_held(slave: Broker) -> Iterator[None]:
    """The slave's HA actor stopped (SIGSTOP): its log, and so its queues, stay where they are."""
    slave.kill("ha", signal.SIGSTOP)
    try:
        yield
    finally:
        slave.kill("ha", signal.SIGCONT)


def test_slave_takes_the_masters_offsets_forward_only_and_within_its_queue(
        master: Broker, slave: Broker, client: rm.RemotingClient, on_slave: rm.RemotingClient) -> None:
    send(master, "MetaS", 1, 6)
    replicated(on_slave, "MetaS", 1, 6)
    commit(client, "GS", "MetaS", 1, 2)
    wait_for(lambda: committed(on_slave, "GS", "MetaS", 1) == 2, 20, "the master's offset 2 on the slave")
    # the master past what the slave holds: held at the slave's queue end, and on once the log caught up
    with ha_held(slave):
        clamped = int(metasync(slave)["offsets_clamped"])
        send(master, "MetaS", 1, 4)
        commit(client, "GS", "MetaS", 1, 10)
        wait_for(lambda: int(metasync(slave)["offsets_clamped"]) > clamped, 20, "an offset held at the queue end")
        assert committed(on_slave, "GS", "MetaS", 1) == 6 and max_offset(on_slave, "MetaS", 1) == 6
    replicated(on_slave, "MetaS", 1, 10)
    wait_for(lambda: committed(on_slave, "GS", "MetaS", 1) == 10, 20, "the master's offset 10 once the slave holds 10")
    # a consumer on the slave got further than the master says: the master's older offset never wins
    commit(on_slave, "GT", "MetaS", 1, 5)
    commit(client, "GT", "MetaS", 1, 1)
    rounds = int(metasync(slave)["rounds"])
    wait_for(lambda: int(metasync(slave)["rounds"]) >= rounds + 3, 20, "three more sync rounds")
    assert committed(on_slave, "GT", "MetaS", 1) == 5
    stats = metasync(slave)
    assert [stats[item] for item in ("topics", "consumer_offsets", "delay_offsets", "timer_checkpoint",
                                     "ack_marks")] == ["ok"] * 5, stats
    assert stats["master"] == f"127.0.0.1:{master.remoting_port}"  # the HA port - 1
    assert stats["last_sync_ms"] > 0
    shown = slave.mqstore("status")  # what a person reads: the sync's master, rounds and items
    assert shown.returncode == 0, shown.stderr
    assert f"metadata: from 127.0.0.1:{master.remoting_port}, synced" in shown.stdout
    assert "every item applied" in shown.stdout and "consumer offsets moved" in shown.stdout
    # the timer checkpoint came with them: the master's read time, masterTimerQueueOffset and data
    # version, nothing enqueued here
    head = struct.unpack(">7q", (slave.store / "config" / "timercheck").read_bytes()[:56])
    assert head[0] == TIMER_LONGS[0] and head[2] == 0 and head[3] == TIMER_LONGS[3] and head[4:] == TIMER_LONGS[4:]


def test_topics_created_on_the_master_reach_the_slaves_topics_file(
        master: Broker, slave: Broker, on_slave: rm.RemotingClient) -> None:
    send(master, "MetaNew", 0, 1)
    wait_for(lambda: "MetaNew" in (read_topic_file(master.store) or ({}, None))[0], 20, "MetaNew on the master")

    def same() -> bool:
        mine, theirs = read_topic_file(slave.store), read_topic_file(master.store)
        return mine is not None and theirs is not None and mine == theirs and "MetaNew" in mine[0]
    wait_for(same, 20, "the master's topics, at its data version, in the slave's topics.json")
    replicated(on_slave, "MetaNew", 0, 1)


def test_delay_offsets_reach_the_slave(master: Broker, slave: Broker) -> None:
    with Producer(master.store) as producer:
        assert producer.send("MetaDelay", b"later", properties={"DELAY": "1"}).ok
    wait_for(lambda: read_delay_offsets(master.store).offsets.get(1, 0) >= 1, 30,
             "the master's scheduler to deliver level 1's message")
    wait_for(lambda: read_delay_offsets(slave.store) == read_delay_offsets(master.store), 20,
             "the master's delay offsets in the slave's delayOffset.json")
    assert read_delay_offsets(slave.store).offsets[1] >= 1


def test_ack_marks_reach_the_slaves_index_forward_only_and_within_its_queue(
        master: Broker, slave: Broker, on_slave: rm.RemotingClient) -> None:
    topic, group = "MetaAckS", "GAS"
    send(master, topic, 0, 10)
    replicated(on_slave, topic, 0, 10)
    got: dict[int, Delivery] = {}

    def receive(consumer: AckConsumer, count: int) -> None:
        def enough() -> bool:
            got.update((d.queue_offset, d) for d in consumer.receive(32, 200))
            return len(got) >= count
        wait_for(enough, 20, f"{count} deliveries")

    with AckConsumer(master.store, group=group, topic=topic, visibility_ms=120_000) as consumer:
        receive(consumer, 10)
        assert consumer.ack([got[q] for q in range(4)]) == [OK] * 4
        wait_for(lambda: ack_mark(on_slave, group, topic, 0) == 4, 20, "the master's ack mark 4 on the slave")
        # the master acks past what the slave holds: held at the slave's queue end
        with ha_held(slave):
            held = int(metasync(slave)["ack_clamped"])
            send(master, topic, 0, 6)
            receive(consumer, 16)
            assert consumer.ack([got[q] for q in range(4, 12)]) == [OK] * 8
            wait_for(lambda: int(metasync(slave)["ack_clamped"]) > held, 20, "an ack mark held at the queue end")
            assert ack_mark(on_slave, group, topic, 0) == 10 and max_offset(on_slave, topic, 0) == 10
        replicated(on_slave, topic, 0, 16)
        wait_for(lambda: ack_mark(on_slave, group, topic, 0) == 12, 20, "the master's mark 12 once the slave holds 16")
    # the slave's own index hands the group out from the master's mark: 12 on, nothing below
    got.clear()
    with AckConsumer(slave.store, group=group, topic=topic, visibility_ms=120_000) as on_the_slave:
        receive(on_the_slave, 4)
        assert sorted(got) == [12, 13, 14, 15]
    stats = metasync(slave)
    assert stats["ack_marks_seen"] >= 1 and stats["ack_queues_moved"] >= 2, stats


def groups(broker: Broker) -> dict[str, list[str]]:
    """The groups with committed offsets on ``broker`` (its reader 0's table)."""
    with Admin(broker.store) as admin:
        return admin.groups()


def test_a_group_deleted_on_the_master_is_deleted_on_the_slave_and_may_come_back_lower(
        master: Broker, slave: Broker, client: rm.RemotingClient, on_slave: rm.RemotingClient) -> None:
    """Offsets merge forward only, so a deletion travels by itself (``deletedGroups`` with its number):
    the slave drops the group's offsets, its own commits too, and a group made again on the master
    after its deletion comes back with its new, lower offsets rather than the old ones."""
    send(master, "MetaDel", 0, 8)
    replicated(on_slave, "MetaDel", 0, 8)
    commit(client, "GDel", "MetaDel", 0, 6)
    commit(client, "GKept", "MetaDel", 0, 2)
    wait_for(lambda: committed(on_slave, "GDel", "MetaDel", 0) == 6, 20, "GDel's offset 6 on the slave")
    commit(on_slave, "GDel", "MetaDel", 0, 7)  # a consumer of the slave got further
    deleted = master.mqstore("groups", "delete", "GDel", "--live-ms", "1")
    assert deleted.returncode == 0, deleted.stderr
    assert "GDel" not in groups(master)
    wait_for(lambda: "GDel" not in groups(slave), 20, "GDel gone from the slave")
    assert committed(on_slave, "GKept", "MetaDel", 0) == 2
    wait_for(lambda: int(metasync(slave)["groups_deleted"]) >= 1, 20, "the deletion in the slave's stats")
    numbers = json.loads((slave.store / "config" / "deletedGroups.json").read_text())["deleted"]
    assert numbers["GDel"] == json.loads((master.store / "config" / "deletedGroups.json").read_text())[
        "deleted"]["GDel"] >= 1
    # made again on the master, below where it was: the slave follows, and does not delete it again
    commit(client, "GDel", "MetaDel", 0, 3)
    wait_for(lambda: committed(on_slave, "GDel", "MetaDel", 0) == 3, 20, "GDel back on the slave at 3")
    rounds = int(metasync(slave)["rounds"])
    wait_for(lambda: int(metasync(slave)["rounds"]) >= rounds + 3, 20, "three more sync rounds")
    assert committed(on_slave, "GDel", "MetaDel", 0) == 3
