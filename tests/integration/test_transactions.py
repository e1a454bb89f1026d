"""Transactional messages through a real broker and the ipc ``Producer``: a commit is consumed once
and not before, a rollback never, an UNKNOWN is settled by the check-back, a producer that never
answers has its half discarded to TRANS_CHECK_MAX_TIME_TOPIC after the max checks, and the whole
tree SIGKILLed between a half and its end loses nothing and delivers once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mqstore.engine.put import transactions as tx
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.api import (
    Admin,
    BrokerError,
    Consumer,
    Outgoing,
    Producer,
    ReceivedMessage,
    SendResult,
    TransactionState,
)
from tests.integration.broker import Broker, wait_for

QUICK = ("transaction_timeout_ms = 300\ntransaction_check_interval_ms = 200\ntransaction_check_max = 3\n"
         "offset_persist_interval_ms = 100")
LOADED_MS = 15_000  # a reply may be slow on a busy machine; no test waits on it to fail
CALM = QUICK.replace("= 300", "= 60000", 1)  # no check comes while a test ends its halves itself


def _orders(broker: Broker) -> Broker:
    with Admin(broker.store) as admin:
        admin.create_topic("Orders", 4)
    return broker


def _poll(consumer: Consumer, into: list[ReceivedMessage]) -> list[ReceivedMessage]:
    into.extend(consumer.poll(100))
    return into


def _unknown(message: Outgoing, result: SendResult) -> TransactionState:
    return TransactionState.UNKNOWN


def _never(message: ReceivedMessage) -> TransactionState:
    raise AssertionError("not asked")


def test_commit_is_consumed_once_and_not_before(tmp_path: Path) -> None:
    with Broker(tmp_path, broker_extra=CALM) as broker, \
            Producer(_orders(broker).store, timeout_ms=LOADED_MS) as producer:
        with Consumer(broker.store, group="g", topic="Orders", start="earliest", long_poll_ms=100) as consumer:
            seen_before: list[ReceivedMessage] = []

            def local(message: Outgoing, result: SendResult) -> TransactionState:
                assert result.ok
                seen_before.extend(consumer.poll(300))  # the half is stored: nothing on the real topic yet
                return TransactionState.COMMIT

            result = producer.send_transactional(Outgoing("Orders", b"paid", tags="t", keys=("o-1",), queue_id=2),
                                                  local, _never, group="pg")
            assert result.state is TransactionState.COMMIT and result.end_error == ""
            assert seen_before == []
            got = wait_for(lambda: _poll(consumer, []), 30, "the committed message")
            assert not consumer.poll(500)  # once
        assert [m.body for m in got] == [b"paid"]
        message = got[0]
        assert message.queue_id == 2 and message.tags == "t" and message.keys == ("o-1",)
        assert message.sys_flag & 0xC == 0x8
        assert message.properties[tx.PROP_REAL_TOPIC] == "Orders" and message.properties[tx.PROP_WAIT] == "false"
        assert message.uniq_key == result.send.uniq_key
        with Admin(broker.store) as admin:
            half = admin.view_by_id(result.send.msg_id)
            assert half is not None and half.topic == tx.HALF_TOPIC and half.queue_id == 0
            assert half.properties[tx.PROP_TRANSACTION_ID] == result.send.uniq_key
            assert half.properties[tx.PROP_REAL_QID] == "2" and half.properties[tx.PROP_PGROUP] == "pg"
            assert half.sys_flag & 0xC == 0
        ops = wait_for(lambda: _all(broker.store, tx.OP_TOPIC), 30, "the op record")
        assert [(m.tags, m.body) for m in ops] == [("d", f"{half.queue_offset},".encode())]
        assert broker.stop() == 0


def _all(store: Path, topic: str) -> list[ReceivedMessage]:
    try:
        consumer = Consumer(store, group=f"look-{topic}", topic=topic, start="earliest", long_poll_ms=100)
    except ValueError:
        return []  # the topic is not made yet
    with consumer:
        got: list[ReceivedMessage] = []
        for _ in range(5):
            got.extend(consumer.poll(100))
        return got


def test_rollback_is_never_delivered(tmp_path: Path) -> None:
    with Broker(tmp_path, broker_extra=CALM) as broker, \
            Producer(_orders(broker).store, timeout_ms=LOADED_MS) as producer:
        result = producer.send_transactional(Outgoing("Orders", b"cancelled"),
                                             lambda m, r: TransactionState.ROLLBACK, _never, group="pg")
        assert result.state is TransactionState.ROLLBACK and result.end_error == ""
        with pytest.raises(BrokerError) as refused:  # another group's end: RocketMQ's checkPrepareMessage
            producer.end_transaction(result.send, TransactionState.COMMIT, group="intruder")
        assert refused.value.status == "END_TRANSACTION_FAILED" and "producer group" in refused.value.reason
        wait_for(lambda: _all(broker.store, tx.OP_TOPIC), 30, "the op record")
        with Consumer(broker.store, group="g", topic="Orders", start="earliest", long_poll_ms=100) as consumer:
            assert not any(consumer.poll(300) for _ in range(5))  # several check runs pass: nothing asks
        assert broker.stop() == 0


def test_unknown_is_settled_by_the_check_back(tmp_path: Path) -> None:
    asked: list[ReceivedMessage] = []
    with Broker(tmp_path, broker_extra=QUICK) as broker, \
            Producer(_orders(broker).store, heartbeat_ms=200, timeout_ms=LOADED_MS) as producer:
        def check_back(message: ReceivedMessage) -> TransactionState:
            asked.append(message)
            return TransactionState.COMMIT

        result = producer.send_transactional(Outgoing("Orders", b"later", keys=("k",)), _unknown, check_back,
                                             group="pg")
        assert result.state is TransactionState.UNKNOWN
        with Consumer(broker.store, group="g", topic="Orders", start="earliest", long_poll_ms=100) as consumer:
            got = wait_for(lambda: _poll(consumer, []), 30, "the message the check-back committed")
            assert [m.body for m in got] == [b"later"]
            assert not any(consumer.poll(300) for _ in range(3))
        assert asked and asked[0].topic == "Orders" and asked[0].body == b"later" and asked[0].keys == ("k",)
        assert asked[0].properties[tx.PROP_CHECK_TIMES] == "1" and asked[0].uniq_key == result.send.uniq_key
        assert broker.stop() == 0


def test_a_producer_that_never_answers_has_its_half_discarded_after_the_max(tmp_path: Path) -> None:
    asked: list[int] = []
    with Broker(tmp_path, broker_extra=QUICK) as broker, \
            Producer(_orders(broker).store, heartbeat_ms=200, timeout_ms=LOADED_MS) as producer:
        def silent(message: ReceivedMessage) -> TransactionState:
            asked.append(int(message.properties[tx.PROP_CHECK_TIMES]))
            return TransactionState.UNKNOWN

        producer.send_transactional(Outgoing("Orders", b"limbo"), _unknown, silent, group="pg")
        discarded = wait_for(lambda: _all(broker.store, tx.CHECK_MAX_TOPIC), 60, "the discard")
        assert [m.body for m in discarded] == [b"limbo"]
        assert discarded[0].properties[tx.PROP_CHECK_TIMES] == "3"
        assert asked == [1, 2, 3]
        with Consumer(broker.store, group="g", topic="Orders", start="earliest", long_poll_ms=100) as consumer:
            assert not consumer.poll(300)
        assert broker.stop() == 0


def test_the_tree_killed_between_half_and_commit_delivers_once(tmp_path: Path) -> None:
    """Two halves: one committed by its producer after the restart, one by the check-back."""
    broker = Broker(tmp_path, broker_extra=CALM)
    answered = threading.Event()

    def check_back(message: ReceivedMessage) -> TransactionState:
        answered.set()
        return TransactionState.COMMIT

    with broker, Producer(_orders(broker).store, heartbeat_ms=200, timeout_ms=LOADED_MS) as producer:
        first = producer.send_transactional(Outgoing("Orders", b"by-end"), _unknown, check_back, group="pg")
        second = producer.send_transactional(Outgoing("Orders", b"by-check"), _unknown, check_back, group="pg")
        broker.kill_tree()
        broker.start()
        with Admin(broker.store) as admin:  # the halves survived the kill
            assert wait_for(lambda: admin.view_by_id(first.send.msg_id), 30, "the half after the restart")
        producer.end_transaction(first.send, TransactionState.COMMIT, group="pg")  # the producer ends it itself
        assert second.state is TransactionState.UNKNOWN
    # the check-back settles the second once the (restarted, shorter) timeout passes
    broker = Broker(tmp_path, broker_extra=QUICK)
    with broker, Producer(broker.store, heartbeat_ms=200, timeout_ms=LOADED_MS) as producer:
        producer.send_transactional(Outgoing("Other", b"x"), lambda m, r: TransactionState.COMMIT, check_back,
                                    group="pg")  # registers the group again
        with Consumer(broker.store, group="g", topic="Orders", start="earliest", long_poll_ms=100) as consumer:
            got: list[ReceivedMessage] = []
            wait_for(lambda: len(_poll(consumer, got)) >= 2, 60, "both messages")
            for _ in range(5):
                _poll(consumer, got)
        assert sorted(m.body for m in got) == [b"by-check", b"by-end"]
        assert answered.is_set()
        assert broker.stop() == 0
    report = verify_store(broker.store)  # halves, copies, commits and op records: a store like any other
    assert report.ok, report
