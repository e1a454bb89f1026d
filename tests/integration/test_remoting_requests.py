"""Request by request, the remoting front through a raw remoting client: Java clients' sends (310,
320), batches, pulls (status codes, tag filter, long polling, committed offsets), offsets on the
readers' consumerOffset.json, consumer groups, send-back into retry and dead-letter topics, routes.
The stock client's retry path runs at the end."""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine.log.record import decode_properties
from mqstore.ipc.client.api import Admin, Producer
from mqstore.ipc.remoting import codec as rm
from tests.integration.broker import Broker, free_port_range, wait_for

LONG_MAX = 2 ** 62


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, int]]:
    port = free_port_range(1)
    broker = Broker(tmp_path_factory.mktemp("requests"), remoting_port=port, commitlog=1024 * 1024, cq=4096,
                    extra_toml='\n[remoting]\nmax_reconsume_times = 1\n[store]\nmessage_delay_level = "1s 1s 1s 2s"\n'
                               'timer_wheel_enable = false\n')
    with broker:
        yield broker, port


@pytest.fixture
def client(front: tuple[Broker, int]) -> Iterator[rm.RemotingClient]:
    with rm.RemotingClient("127.0.0.1", front[1]) as c:
        yield c


def send_ext(topic: str, queue: int, props: str, **more: Any) -> dict[str, Any]:
    return {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
            "queueId": queue, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0,
            "properties": props, "reconsumeTimes": 0, "unitMode": "false", "batch": "false", **more}


def encode_batch(items: list[tuple[bytes, str]]) -> bytes:
    out = b""
    for body, props in items:
        raw = props.encode()
        out += struct.pack(">iiiii", 22 + len(body) + len(raw), 0, 0, 0, len(body)) + body + struct.pack(
            ">h", len(raw)) + raw
    return out


def pull(client: rm.RemotingClient, topic: str, queue: int, offset: int, *, sys_flag: int = 0,
         subscription: str = "*", group: str = "G", commit: int = 0, suspend_ms: int = 0) -> rm.RemotingCommand:
    return client.call(rm.PULL_MESSAGE, {"consumerGroup": group, "topic": topic, "queueId": queue,
                                         "queueOffset": offset, "maxMsgNums": 32, "sysFlag": sys_flag,
                                         "commitOffset": commit, "suspendTimeoutMillis": suspend_ms,
                                         "subscription": subscription, "subVersion": 0})


def records_when(client: rm.RemotingClient, topic: str, queue: int, count: int) -> list[Any]:
    """The queue's first ``count`` records, once the builders made them consumable."""
    def ready() -> list[Any] | None:
        reply = pull(client, topic, queue, 0)
        records = rm.decode_records(reply.body) if reply.code == rm.SUCCESS else []
        return records if len(records) >= count else None
    return wait_for(ready, 10, f"{count} records in {topic}/{queue}")  # type: ignore[no-any-return]


def query_when(client: rm.RemotingClient, topic: str, key: str, count: int) -> list[Any]:
    """The records QUERY_MESSAGE finds for ``key``, once the index builder has indexed ``count``
    (it runs apart from the consume-queue builder, so a consumable record may not be indexed yet)."""
    def ready() -> list[Any] | None:
        reply = client.call(rm.QUERY_MESSAGE, {"topic": topic, "key": key, "maxNum": 32, "beginTimestamp": 0,
                                               "endTimestamp": LONG_MAX})
        records = rm.decode_records(reply.body) if reply.code == rm.SUCCESS else []
        return records if len(records) >= count else None
    return wait_for(ready, 10, f"{count} records indexed under {key}")  # type: ignore[no-any-return]


def test_java_v2_send_and_both_batch_forms_store_each_message(client: rm.RemotingClient) -> None:
    v2 = {"a": "PG", "b": "Java", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1700000000000", "h": "0",
          "i": "KEYS\x01j-1\x02UNIQ_KEY\x01AAAA0001\x02", "j": "0", "k": "false", "m": "false"}
    reply = client.call(rm.SEND_MESSAGE_V2, v2, b"java body")
    assert reply.code == rm.SUCCESS, reply.remark
    assert (reply.ext["queueId"], reply.ext["queueOffset"]) == ("2", "0")
    batch = encode_batch([(f"b-{i}".encode(), f"KEYS\x01bk-{i}\x02UNIQ_KEY\x01BATCH{i:04d}\x02") for i in range(5)])
    for code, ext in ((rm.SEND_BATCH_MESSAGE, {**v2, "m": "true"}),
                      (rm.SEND_MESSAGE, send_ext("Java", 2, "", batch="1"))):  # the C++ client's form
        reply = client.call(code, ext, batch)
        assert reply.code == rm.SUCCESS, reply.remark
        assert len(reply.ext["msgId"].split(",")) == 5
    records = records_when(client, "Java", 2, 11)
    assert [r.queue_offset for r in records] == list(range(11))
    delayed = client.call(rm.SEND_MESSAGE, send_ext("Java", 2, "DELAY\x012\x02", batch="1"), batch)
    assert delayed.code == rm.MESSAGE_ILLEGAL  # RocketMQ refuses a batch with a delay level
    assert [r.body for r in records] == [b"java body", *[f"b-{i}".encode() for i in range(5)] * 2]
    assert records[3].keys == ["bk-2"] and records[3].uniq_key == "BATCH0002"
    assert sorted(r.queue_offset for r in query_when(client, "Java", "bk-4", 2)) == [5, 10]


def test_sends_the_store_refuses_get_a_code_and_a_reason(client: rm.RemotingClient) -> None:
    bad_topic = client.call(rm.SEND_MESSAGE, send_ext("no spaces allowed", 0, ""), b"x")
    assert bad_topic.code == rm.SYSTEM_ERROR and "characters" in str(bad_topic.remark)
    bad_queue = client.call(rm.SEND_MESSAGE, send_ext("Refused", 99, ""), b"x")
    assert bad_queue.code == rm.MESSAGE_ILLEGAL and "out of range" in str(bad_queue.remark)
    reserved = client.call(rm.SEND_MESSAGE, send_ext("Refused", 0, "__CRC32#\x010000000000\x02"), b"x")
    assert reserved.code == rm.MESSAGE_ILLEGAL
    bad_batch = client.call(rm.SEND_MESSAGE, send_ext("Refused", 0, "", batch="1"), b"\x00\x00\x00\x50rest")
    assert bad_batch.code == rm.SYSTEM_ERROR
    timer = client.call(rm.SEND_MESSAGE, send_ext("Refused", 0, "TIMER_DELAY_MS\x015000\x02"), b"x")
    assert timer.code == rm.SYSTEM_ERROR and "WHEEL_TIMER_NOT_ENABLE" in str(timer.remark)  # timers are off here
    for system in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_moved"):  # only the broker puts there
        forbidden = client.call(rm.SEND_MESSAGE, send_ext(system, 0, ""), b"x")
        assert forbidden.code == rm.NO_PERMISSION and f"topic[{system}] is forbidden" in str(forbidden.remark)
    missing = client.call(rm.SEND_MESSAGE, {"topic": "Refused"}, b"x")
    assert missing.code == rm.SYSTEM_ERROR and "queueId" in str(missing.remark)
    assert client.call(rm.GET_MAX_OFFSET, {"topic": "Refused", "queueId": 0}).ext["offset"] == "0"


def test_pull_statuses_tag_filter_and_commit_flag(front: tuple[Broker, int], client: rm.RemotingClient) -> None:
    broker, _ = front
    with Producer(broker.store) as producer:
        results = producer.send_batch([{"topic": "Pulls", "body": f"p-{i}".encode(), "tags": "A" if i % 2 else "B",
                                        "queue_id": 0} for i in range(10)])
    assert all(r.ok for r in results)
    records_when(client, "Pulls", 0, 10)
    tagged = pull(client, "Pulls", 0, 0, sys_flag=rm.PULL_SUBSCRIPTION, subscription="A")
    assert tagged.code == rm.SUCCESS
    assert [r.tags for r in rm.decode_records(tagged.body)] == ["A"] * 5
    assert tagged.ext == {"suggestWhichBrokerId": "0", "nextBeginOffset": "10", "minOffset": "0", "maxOffset": "10"}
    none_match = pull(client, "Pulls", 0, 0, sys_flag=rm.PULL_SUBSCRIPTION, subscription="C")
    assert (none_match.code, none_match.ext["nextBeginOffset"]) == (rm.PULL_RETRY_IMMEDIATELY, "10")
    at_end = pull(client, "Pulls", 0, 10)
    assert (at_end.code, at_end.ext["nextBeginOffset"]) == (rm.PULL_NOT_FOUND, "10")
    beyond = pull(client, "Pulls", 0, 50)
    assert (beyond.code, beyond.ext["nextBeginOffset"]) == (rm.PULL_OFFSET_MOVED, "10")
    empty = pull(client, "Pulls", 3, 0)
    assert empty.code == rm.PULL_NOT_FOUND
    committed = pull(client, "Pulls", 0, 4, sys_flag=rm.PULL_COMMIT_OFFSET, group="GC", commit=4)
    assert committed.code == rm.SUCCESS
    with Admin(broker.store) as admin:
        assert admin.fetch_offset("GC", "Pulls", 0) == 4
    # a commit the readers refuse (past the queue's end) leaves the pull itself served
    refused = pull(client, "Pulls", 0, 6, sys_flag=rm.PULL_COMMIT_OFFSET, group="GC", commit=500)
    assert refused.code == rm.SUCCESS and len(rm.decode_records(refused.body)) == 4


def test_pulls_keep_rocketmqs_transfer_caps(front: tuple[Broker, int], client: rm.RemotingClient) -> None:
    """A stock client's pull gets at most maxTransferCountOnMessageInMemory (32) messages and
    maxTransferBytesOnMessageInMemory (256 KiB), whatever the ipc consumers' byte-sized pulls take."""
    broker, _ = front
    with Producer(broker.store) as producer:
        assert all(r.ok for r in producer.send_batch([{"topic": "Caps", "body": b"s" * 100, "queue_id": 0}] * 40))
        assert all(r.ok for r in producer.send_batch([{"topic": "Caps", "body": b"b" * 16384, "queue_id": 1}] * 20))
    records_when(client, "Caps", 0, 32)
    records_when(client, "Caps", 1, 15)

    def big_pull(queue: int) -> rm.RemotingCommand:
        return client.call(rm.PULL_MESSAGE, {"consumerGroup": "G", "topic": "Caps", "queueId": queue,
                                             "queueOffset": 0, "maxMsgNums": 1000, "sysFlag": 0, "commitOffset": 0,
                                             "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
    small = big_pull(0)
    assert small.code == rm.SUCCESS and len(rm.decode_records(small.body)) == 32
    assert small.ext["nextBeginOffset"] == "32"
    big = big_pull(1)
    assert big.code == rm.SUCCESS and len(big.body) <= 256 * 1024
    assert len(rm.decode_records(big.body)) == 256 * 1024 // (len(big.body) // len(rm.decode_records(big.body)))


def test_suspended_pull_is_answered_when_a_message_arrives(front: tuple[Broker, int],
                                                          client: rm.RemotingClient) -> None:
    broker, _ = front
    replies: list[rm.RemotingCommand] = []
    # held for up to 20 s: an answer with the message (not PULL_NOT_FOUND) proves the wake-up
    waiter = threading.Thread(target=lambda: replies.append(
        pull(client, "Held", 1, 0, sys_flag=rm.PULL_SUSPEND, suspend_ms=20_000)))
    waiter.start()
    time.sleep(0.5)  # let the pull park first; were it not parked yet, it would find the message anyway
    with Producer(broker.store) as producer:
        assert producer.send("Held", b"wake up", queue_id=1).ok
    waiter.join(30)
    assert replies and replies[0].code == rm.SUCCESS
    assert [r.body for r in rm.decode_records(replies[0].body)] == [b"wake up"]


def test_offsets_are_the_readers_table(front: tuple[Broker, int], client: rm.RemotingClient) -> None:
    broker, _ = front
    with Producer(broker.store) as producer:
        sent = [producer.send("Offsets", f"o-{i}".encode(), queue_id=0) for i in range(6)]
    assert all(r.ok for r in sent)
    records_when(client, "Offsets", 0, 6)  # offsets are checked against what is consumable
    fresh = client.call(rm.QUERY_CONSUMER_OFFSET, {"consumerGroup": "NEW", "topic": "Offsets", "queueId": 0})
    assert (fresh.code, fresh.ext["offset"]) == (rm.SUCCESS, "0")  # a new group starts at the queue's start
    client.call(rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "OG", "topic": "Offsets", "queueId": 0,
                                            "commitOffset": 4})
    stored = client.call(rm.QUERY_CONSUMER_OFFSET, {"consumerGroup": "OG", "topic": "Offsets", "queueId": 0})
    assert stored.ext["offset"] == "4"
    with Admin(broker.store) as admin:
        assert admin.fetch_offset("OG", "Offsets", 0) == 4
        admin.commit_offset("OG", "Offsets", 0, 5)
    assert client.call(rm.QUERY_CONSUMER_OFFSET, {"consumerGroup": "OG", "topic": "Offsets",
                                                  "queueId": 0}).ext["offset"] == "5"
    too_far = client.call(rm.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "OG", "topic": "Offsets", "queueId": 0,
                                                      "commitOffset": 1000})
    assert too_far.code == rm.SYSTEM_ERROR and "beyond" in str(too_far.remark)
    assert client.call(rm.GET_MIN_OFFSET, {"topic": "Offsets", "queueId": 0}).ext["offset"] == "0"
    assert client.call(rm.GET_MAX_OFFSET, {"topic": "Offsets", "queueId": 0}).ext["offset"] == "6"
    by_time = client.call(rm.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "Offsets", "queueId": 0, "timestamp": 0})
    assert by_time.ext["offset"] == "0"


def test_consumer_groups_follow_heartbeats_unregister_and_closed_connections(front: tuple[Broker, int],
                                                                             client: rm.RemotingClient) -> None:
    body = json.dumps({"clientID": "10-127.0.0.1@A", "consumerDataSet": [
        {"groupName": "HG", "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0,
         "subscriptionDataSet": [{"topic": "T", "subString": "*", "subVersion": "1"}]}]}).encode()
    assert client.call(rm.HEART_BEAT, {}, body).code == rm.SUCCESS
    with rm.RemotingClient("127.0.0.1", front[1]) as other:
        assert other.call(rm.HEART_BEAT, {}, body.replace(b"10-", b"11-")).code == rm.SUCCESS
        listed = client.call(rm.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "HG"})
        assert json.loads(listed.body) == {"consumerIdList": ["10-127.0.0.1@A", "11-127.0.0.1@A"]}
    deadline = time.monotonic() + 10
    while json.loads(client.call(rm.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "HG"}).body or b"{}").get(
            "consumerIdList") != ["10-127.0.0.1@A"]:
        assert time.monotonic() < deadline, "the closed connection's client is still listed"
        time.sleep(0.05)
    assert client.call(rm.UNREGISTER_CLIENT, {"clientID": "10-127.0.0.1@A", "producerGroup": "",
                                              "consumerGroup": "HG"}).code == rm.SUCCESS
    assert client.call(rm.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "HG"}).code == rm.SYSTEM_ERROR
    assert client.call(rm.HEART_BEAT, {}, b"{not json").code == rm.SYSTEM_ERROR


def test_send_back_goes_to_retry_then_dead_letter_topic(front: tuple[Broker, int], client: rm.RemotingClient) -> None:
    broker, _ = front
    with Producer(broker.store) as producer:
        original = producer.send("Orders", b"to retry", keys=["sb-1"], queue_id=0)
    assert original.ok
    records_when(client, "Orders", 0, 1)  # a consumer sends back what it pulled
    sent_back_ms = int(time.time() * 1000)
    back = client.call(rm.CONSUMER_SEND_MSG_BACK, {"group": "SB", "delayLevel": 0, "offset": original.phys_offset})
    assert back.code == rm.SUCCESS, back.remark
    route = json.loads(client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%SB"}).body)
    assert route["queueDatas"][0]["readQueueNums"] == 1
    retried = records_when(client, "%RETRY%SB", 0, 1)
    assert [r.body for r in retried] == [b"to retry"]
    props = retried[0].properties
    assert (props["RETRY_TOPIC"], props["RECONSUME_TIME"], retried[0].reconsume_times) == ("Orders", "1", 1)
    assert props["ORIGIN_MESSAGE_ID"] == original.uniq_key
    # through the schedule topic at level 3 + 0 reconsume times (1 s here), as RocketMQ's retries go
    assert (props["REAL_TOPIC"], props["REAL_QID"], props["DELAY_OFFSET"]) == ("%RETRY%SB", "0", "3:0")
    assert retried[0].store_ms >= sent_back_ms + 1000
    again = client.call(rm.CONSUMER_SEND_MSG_BACK, {"group": "SB", "delayLevel": 0, "offset": retried[0].phys_offset})
    assert again.code == rm.SUCCESS  # max_reconsume_times = 1: the second time goes to the dead letters
    dead = records_when(client, "%DLQ%SB", 0, 1)
    assert [(r.body, r.reconsume_times) for r in dead] == [(b"to retry", 2)]
    assert client.call(rm.CONSUMER_SEND_MSG_BACK, {"group": "SB", "offset": 10 ** 12}).code == rm.SYSTEM_ERROR


def test_send_back_at_the_clients_level_or_straight_to_the_dead_letters(front: tuple[Broker, int],
                                                                       client: rm.RemotingClient) -> None:
    """A delayLevel above 0 is the level the retry waits on; below 0 the message goes to %DLQ% at once."""
    broker, _ = front
    with Producer(broker.store) as producer:
        first, second = (producer.send("Later", body, queue_id=0) for body in (b"level 4", b"no retry"))
    records_when(client, "Later", 0, 2)
    back = client.call(rm.CONSUMER_SEND_MSG_BACK, {"group": "SL", "delayLevel": 4, "offset": first.phys_offset})
    assert back.code == rm.SUCCESS, back.remark
    [retried] = records_when(client, "%RETRY%SL", 0, 1)
    assert (retried.body, retried.properties["DELAY_OFFSET"]) == (b"level 4", "4:0")  # level 4: 2 s here
    dead = client.call(rm.CONSUMER_SEND_MSG_BACK, {"group": "SL", "delayLevel": -1, "offset": second.phys_offset})
    assert dead.code == rm.SUCCESS, dead.remark
    [letter] = records_when(client, "%DLQ%SL", 0, 1)
    assert (letter.body, letter.properties["DELAY"], letter.reconsume_times) == (b"no retry", "0", 1)


def test_routes_follow_the_writers_topics(front: tuple[Broker, int], client: rm.RemotingClient) -> None:
    broker, port = front
    with Admin(broker.store) as admin:
        admin.create_topic("Wide", 8)
    deadline = time.monotonic() + 10
    while True:  # the front caches the topic table for a second
        route = json.loads(client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "Wide"}).body)
        if route["queueDatas"][0]["writeQueueNums"] == 8 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert route["queueDatas"][0] == {"brokerName": "broker-a", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
                                      "topicSysFlag": 0}
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": f"127.0.0.1:{port}"}
    fresh = json.loads(client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "NotYet"}).body)
    assert fresh["queueDatas"][0]["writeQueueNums"] == 4  # what the writer gives a topic on its first send
    assert client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "bad topic"}).code == rm.TOPIC_NOT_EXIST


def test_stored_properties_are_the_clients_string_as_given(front: tuple[Broker, int],
                                                          client: rm.RemotingClient) -> None:
    props = "KEYS\x01a b\x02TAGS\x01T\x02UNIQ_KEY\x01ABCDEF\x02WAIT\x01true\x02zz\x01last\x02"
    reply = client.call(rm.SEND_MESSAGE, send_ext("Verbatim", 0, props), b"v")
    assert reply.code == rm.SUCCESS
    record = records_when(client, "Verbatim", 0, 1)[0]
    assert list(record.properties.items()) == list(decode_properties(props.encode()).items())
    assert record.keys == ["a", "b"] and record.tags == "T"
    for key in ("a", "b"):  # KEYS given as a property are indexed like keys
        assert [r.body for r in query_when(client, "Verbatim", key, 1)] == [b"v"]


@pytest.mark.slow
def test_stock_push_consumer_failure_is_redelivered_through_the_retry_topic(front: tuple[Broker, int],
                                                                            tmp_path: Path) -> None:
    pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")
    from tests.integration.test_remoting import peer
    ns = f"127.0.0.1:{front[1]}"
    sent = peer(tmp_path, "produce", ns, "Retried", 30)
    got = peer(tmp_path, "push", ns, "Retried", "CG_retry", 30, 60, "--fail-every", 10)
    # the callback fails the first delivery of key-0, key-10 and key-20; the client then sends back
    # that message and the rest of its pulled batch (so key-20, behind key-0 in queue 0, may never
    # see a first delivery), and they all come back through %RETRY%CG_retry with reconsume times 1
    assert {m["id"] for m in got if not m["failed"]} == {r["msg_id"] for r in sent}
    failed = {m["keys"] for m in got if m["failed"]}
    assert "key-0" in failed and failed <= {"key-0", "key-10", "key-20"}
    redelivered = [m for m in got if m["reconsume"] == 1]
    assert failed <= {m["keys"] for m in redelivered}
    assert {m["topic"] for m in redelivered} == {"Retried"}  # the client restores RETRY_TOPIC
