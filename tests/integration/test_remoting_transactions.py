"""Transactional messages through the remoting front, with a hand-rolled RocketMQ client (the stock
0.4.4 client has no transactional producer): SEND with TRAN_MSG / PGROUP (C++ style, and Java's
sysFlag 4), END_TRANSACTION oneway, a CHECK_TRANSACTION_STATE received and answered. The stored
bytes are checked against RocketMQ's layout: the half record's properties and sysFlag, the op
topic's body, the committed record's sysFlag, PREPARED TX OFFSET and properties."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine.log.msgid import offset_msg_id
from mqstore.engine.log.record import Record, decode_record
from mqstore.engine.put import transactions as tx
from mqstore.ipc.client.api import Admin
from mqstore.ipc.remoting import codec as rm
from tests.integration.broker import Broker, free_port_range, wait_for

QUICK = "transaction_timeout_ms = 300\ntransaction_check_interval_ms = 200\ntransaction_check_max = 3"
CALM = QUICK.replace("= 300", "= 60000", 1)  # no check comes while a test ends its halves itself


@pytest.fixture
def front(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Broker, rm.RemotingClient]]:
    port = free_port_range(1)
    with Broker(tmp_path, remoting_port=port, broker_extra=getattr(request, "param", QUICK)) as broker:
        with Admin(broker.store) as admin:
            admin.create_topic("TxOrders", 4)
        with rm.RemotingClient("127.0.0.1", port) as client:
            heartbeat = {"clientID": "127.0.0.1@tx", "producerDataSet": [{"groupName": "TPG"},
                                                                         {"groupName": "CLIENT_INNER_PRODUCER"}],
                         "consumerDataSet": []}
            assert client.call(rm.HEART_BEAT, {}, json.dumps(heartbeat).encode()).code == rm.SUCCESS
            yield broker, client


def half_send(client: rm.RemotingClient, body: bytes, uniq: str, queue: int, sys_flag: int = 0,
              more: str = "") -> dict[str, str]:
    props = f"TRAN_MSG\x01true\x02PGROUP\x01TPG\x02UNIQ_KEY\x01{uniq}\x02TAGS\x01t\x02WAIT\x01true\x02DELAY\x013\x02"
    props += more
    reply = client.call(rm.SEND_MESSAGE, {"producerGroup": "TPG", "topic": "TxOrders", "defaultTopic": "TBW102",
                                          "defaultTopicQueueNums": 4, "queueId": queue, "sysFlag": sys_flag,
                                          "bornTimestamp": int(time.time() * 1000), "flag": 0, "properties": props,
                                          "reconsumeTimes": 0, "unitMode": "false", "batch": "false"}, body)
    assert reply.code == rm.SUCCESS, reply.remark
    assert reply.ext["transactionId"] == uniq
    return reply.ext


def phys_of(offset_msg_id: str) -> int:
    return int(offset_msg_id[-16:], 16)


def records(client: rm.RemotingClient, topic: str, queue: int) -> list[Record]:
    reply = client.call(rm.PULL_MESSAGE, {"consumerGroup": "look", "topic": topic, "queueId": queue,
                                          "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0,
                                          "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
    return rm.decode_records(reply.body) if reply.code == rm.SUCCESS else []


def end(client: rm.RemotingClient, ext: dict[str, Any], state: int, from_check: bool = False) -> None:
    client.oneway(rm.END_TRANSACTION, {"producerGroup": "TPG", "commitOrRollback": state,
                                       "fromTransactionCheck": str(from_check).lower(), **ext})


@pytest.mark.parametrize("front", [CALM], indirect=True)
def test_commit_rollback_and_the_stored_bytes(front: tuple[Broker, rm.RemotingClient]) -> None:
    broker, client = front
    committed = half_send(client, b"commit me", "UNIQ-C", queue=1, sys_flag=4)  # Java: sysFlag 4 as well
    rolled_back = half_send(client, b"roll me back", "UNIQ-R", queue=1)      # C++: TRAN_MSG only
    half_phys = phys_of(committed["msgId"])
    view = wait_for(lambda: client.call(rm.VIEW_MESSAGE_BY_ID, {"offset": half_phys}).body, 30, "the half")
    half = rm.decode_records(view)[0]
    assert (half.topic, half.queue_id, half.queue_offset) == (tx.HALF_TOPIC, 0, int(committed["queueOffset"]))
    assert half.sys_flag & 0xC == 0  # reset to NOT_TYPE: the half queue indexes it
    assert {k: half.properties[k] for k in ("TRAN_MSG", "PGROUP", "__transactionId__", "REAL_TOPIC", "REAL_QID",
                                             "WAIT")} == {"TRAN_MSG": "true", "PGROUP": "TPG",
                                                          "__transactionId__": "UNIQ-C", "REAL_TOPIC": "TxOrders",
                                                          "REAL_QID": "1", "WAIT": "true"}
    assert "DELAY" not in half.properties  # RocketMQ #1540
    assert records(client, "TxOrders", 1) == []
    for ext, state in ((committed, 8), (rolled_back, 12)):
        end(client, {"tranStateTableOffset": ext["queueOffset"], "commitLogOffset": phys_of(ext["msgId"]),
                     "msgId": ext["transactionId"], "transactionId": ext["transactionId"]}, state)
    stored = wait_for(lambda: records(client, "TxOrders", 1), 30, "the committed message")
    assert [r.body for r in stored] == [b"commit me"]
    record = stored[0]
    assert record.sys_flag & 0xC == 8 and record.prepared_tx_offset == half_phys
    assert record.properties["WAIT"] == "false" and record.properties["UNIQ_KEY"] == "UNIQ-C"
    assert record.properties["REAL_TOPIC"] == "TxOrders" and record.properties["TRAN_MSG"] == "true"
    halves = sorted(int(e["queueOffset"]) for e in (committed, rolled_back))

    def ops_listing_both() -> list[Record] | None:
        ops = records(client, tx.OP_TOPIC, 0)
        return ops if sorted(h for op in ops for h in tx.parse_op_body(op.body)) == halves else None

    ops = wait_for(ops_listing_both, 30, "op records resolving both halves")
    assert all(re.fullmatch(rb"(\d+,)+", op.body) for op in ops)  # "17," or, batched, "17,18,"
    assert {op.tags for op in ops} == {"d"} and {op.sys_flag & 0xC for op in ops} == {0}
    assert client.call(rm.GET_MAX_OFFSET, {"topic": "TxOrders", "queueId": 1}).ext["offset"] == "1"
    assert client.requests == []
    assert broker.stop() == 0


def test_a_check_is_received_and_answered(front: tuple[Broker, rm.RemotingClient]) -> None:
    broker, client = front
    sent = half_send(client, b"ask me", "UNIQ-Q", queue=3)
    check = client.next_request()
    assert check.code == rm.CHECK_TRANSACTION_STATE and check.is_oneway
    ext = check.ext
    assert ext["topic"] == tx.HALF_TOPIC and ext["msgId"] == ext["transactionId"] == "UNIQ-Q"
    assert int(ext["tranStateTableOffset"]) > int(sent["queueOffset"])  # the re-appended copy
    assert phys_of(ext["offsetMsgId"]) == int(ext["commitLogOffset"])
    decoded = decode_record(check.body, 0, check_crc=False).record
    assert decoded is not None and (decoded.topic, decoded.queue_id, decoded.body) == ("TxOrders", 3, b"ask me")
    assert decoded.properties["TRANSACTION_CHECK_TIMES"] == "1"
    end(client, {"tranStateTableOffset": ext["tranStateTableOffset"], "commitLogOffset": ext["commitLogOffset"],
                 "msgId": "UNIQ-Q", "transactionId": "UNIQ-Q"}, 8, from_check=True)
    stored = wait_for(lambda: records(client, "TxOrders", 3), 30, "the message the check committed")
    assert [r.body for r in stored] == [b"ask me"]
    assert broker.stop() == 0


def test_an_immune_half_is_copied_not_checked_and_a_late_end_is_illegal(
        front: tuple[Broker, rm.RemotingClient]) -> None:
    broker, client = front
    born_ms = int(time.time() * 1000)
    sent = half_send(client, b"immune", "UNIQ-I", queue=2, more=f"{tx.PROP_CHECK_IMMUNITY}\x012\x02")
    first = int(sent["queueOffset"])

    def immunity_copies() -> list[Record] | None:
        copies = [r for r in records(client, tx.HALF_TOPIC, 0) if r.queue_offset > first]
        return copies if len(copies) >= 2 else None

    copies = wait_for(immunity_copies, 30, "copies made while the half is immune")
    assert {r.properties.get(tx.PROP_PREPARED_QUEUE_OFFSET) for r in copies} == {str(first)}
    assert all("TRANSACTION_CHECK_TIMES" not in r.properties for r in copies)  # copied, not checked
    wait_for(lambda: time.time() * 1000 > born_ms + 2_100, 30, "the immunity to pass")
    late = client.call(rm.END_TRANSACTION, {"producerGroup": "TPG", "commitOrRollback": 8, "fromTransactionCheck":
                                            "false", "tranStateTableOffset": first,
                                            "commitLogOffset": phys_of(sent["msgId"]), "msgId": "UNIQ-I"})
    assert late.code == rm.ILLEGAL_OPERATION and "immunity" in str(late.remark)
    check = client.next_request()
    assert check.code == rm.CHECK_TRANSACTION_STATE and time.time() * 1000 >= born_ms + 2_000
    decoded = decode_record(check.body, 0, check_crc=False).record
    assert decoded is not None and decoded.properties[tx.PROP_PREPARED_QUEUE_OFFSET] == str(first)
    end(client, {"tranStateTableOffset": check.ext["tranStateTableOffset"],
                 "commitLogOffset": check.ext["commitLogOffset"], "msgId": "UNIQ-I"}, 8, from_check=True)
    stored = wait_for(lambda: records(client, "TxOrders", 2), 30, "the message the check committed")
    assert [r.body for r in stored] == [b"immune"]
    assert broker.stop() == 0


def test_a_discarded_half_is_resumed_by_resume_check_half_message(front: tuple[Broker, rm.RemotingClient]) -> None:
    broker, client = front
    half_send(client, b"forgotten", "UNIQ-F", queue=0)
    discarded = wait_for(lambda: records(client, tx.CHECK_MAX_TOPIC, 0), 30, "the half discarded after 3 checks")
    (gone,) = discarded
    assert gone.properties["TRANSACTION_CHECK_TIMES"] == "3" and gone.body == b"forgotten"
    client.requests.clear()  # the three checks nobody answered
    a_half = records(client, tx.HALF_TOPIC, 0)[0]
    a_half_id = offset_msg_id(gone.store_host, a_half.phys_offset)
    not_a_discard = client.call(rm.RESUME_CHECK_HALF_MESSAGE, {"msgId": a_half_id})
    assert not_a_discard.code == rm.SYSTEM_ERROR and tx.CHECK_MAX_TOPIC in str(not_a_discard.remark)
    assert client.call(rm.RESUME_CHECK_HALF_MESSAGE, {"msgId": "not hex"}).code == rm.SYSTEM_ERROR
    resumed = client.call(rm.RESUME_CHECK_HALF_MESSAGE, {"msgId": offset_msg_id(gone.store_host, gone.phys_offset)})
    assert resumed.code == rm.SUCCESS, resumed.remark
    check = client.next_request()
    decoded = decode_record(check.body, 0, check_crc=False).record
    assert decoded is not None and decoded.body == b"forgotten"
    assert decoded.properties["TRANSACTION_CHECK_TIMES"] == "1"  # counted again from 0
    end(client, {"tranStateTableOffset": check.ext["tranStateTableOffset"],
                 "commitLogOffset": check.ext["commitLogOffset"], "msgId": "UNIQ-F"}, 8, from_check=True)
    stored = wait_for(lambda: records(client, "TxOrders", 0), 30, "the resumed commit")
    assert [r.body for r in stored] == [b"forgotten"]
    assert broker.stop() == 0
