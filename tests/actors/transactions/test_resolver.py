"""END_TRANSACTION's resolution against a broker stand-in: what is sent, in which order, and what a
refused commit leaves behind."""

from __future__ import annotations

import itertools

from mqstore.actors.transactions.resolver import EndRequest, Resolver
from mqstore.engine.log.host import Host
from mqstore.engine.log.message import PutStatus
from mqstore.engine.log.record import Record, decode_record, encode_record
from mqstore.engine.put import transactions as tx
from mqstore.ipc.wire.messages import Outgoing, SendResult

HOST = Host("127.0.0.1", 10911)


def half(queue_offset: int, phys_offset: int, group: str = "pg") -> Record:
    props = {"TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": f"U{queue_offset}", "REAL_TOPIC": "Orders",
             "REAL_QID": "2", "__transactionId__": f"U{queue_offset}", "TAGS": "t"}
    raw = encode_record(topic=tx.HALF_TOPIC, body=b"b%d" % queue_offset, properties=props, born_host=HOST,
                        store_host=HOST, queue_offset=queue_offset, phys_offset=phys_offset, sys_flag=0x1)
    record = decode_record(bytes(raw), 0, check_crc=False).record
    assert record is not None
    return record


class FakeBroker:
    def __init__(self, halves: list[Record], refuse_topic: str = "") -> None:
        self.halves = {h.phys_offset: h for h in halves}
        self.refuse_topic = refuse_topic
        self.sends: list[list[Outgoing]] = []

    def record_at(self, phys_offset: int) -> Record | None:
        return self.halves.get(phys_offset)

    def send(self, messages: list[Outgoing]) -> list[SendResult]:
        self.sends.append(messages)
        return [SendResult(PutStatus.MESSAGE_ILLEGAL, reason="gone") if m.topic == self.refuse_topic
                else SendResult(PutStatus.PUT_OK, "ID", m.queue_id or 0, 7, 1000 + i) for i, m in enumerate(messages)]


def resolver(broker: FakeBroker) -> Resolver:
    clock = itertools.count(0, 500)  # each look at the clock half a second on: a missing half is given up soon
    return Resolver(broker, lambda: next(clock), lambda s: None)  # type: ignore[arg-type]


def end(queue_offset: int, phys_offset: int, state: tx.TransactionState, group: str = "pg") -> EndRequest:
    return EndRequest(group, queue_offset, phys_offset, state)


def test_a_round_of_ends_is_one_send_commits_first_then_one_op_record() -> None:
    broker = FakeBroker([half(3, 300), half(5, 500)])
    results = resolver(broker).end([end(5, 500, tx.TransactionState.ROLLBACK), end(3, 300, tx.TransactionState.COMMIT),
                                    end(9, 900, tx.TransactionState.UNKNOWN)])
    assert [r.ok for r in results] == [True, True, True]
    (sent,) = broker.sends
    commit, op = sent
    assert (commit.topic, commit.queue_id, commit.body, commit.tags) == ("Orders", 2, b"b3", "t")
    assert commit.sys_flag == 0x1 | 0x8 and commit.prepared_tx_offset == 300
    assert commit.properties["WAIT"] == "false" and commit.properties["REAL_TOPIC"] == "Orders"
    assert "TAGS" not in commit.properties  # sent as the tags field
    assert (op.topic, op.queue_id, op.tags, op.body) == (tx.OP_TOPIC, 0, "d", b"3,5,")
    assert results[1].committed is not None and results[1].committed.ok


def test_an_end_that_does_not_match_its_half_changes_nothing() -> None:
    broker = FakeBroker([half(3, 300)])
    results = resolver(broker).end([end(3, 300, tx.TransactionState.COMMIT, group="other"),
                                    end(4, 300, tx.TransactionState.COMMIT),
                                    end(3, 999, tx.TransactionState.ROLLBACK)])
    assert [r.ok for r in results] == [False, False, False]
    assert broker.sends == []


def test_a_refused_commit_leaves_its_half_for_a_check() -> None:
    broker = FakeBroker([half(3, 300)], refuse_topic="Orders")
    (result,) = resolver(broker).end([end(3, 300, tx.TransactionState.COMMIT)])
    assert not result.ok and "commit was not stored" in result.reason
    first, again = broker.sends
    assert [m.topic for m in first] == ["Orders", tx.OP_TOPIC]
    (copy,) = again
    assert (copy.topic, copy.queue_id, copy.body) == (tx.HALF_TOPIC, 0, b"b3")
    assert copy.properties["PGROUP"] == "pg" and "TRANSACTION_CHECK_TIMES" not in copy.properties
