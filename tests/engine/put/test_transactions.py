"""The transaction rules RocketMQ's broker applies on put and on END_TRANSACTION, and the op body codec."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mqstore.engine import StoreConfig
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.put import transactions as tx
from mqstore.engine.put.rewrite import rewrite

CONFIG = StoreConfig()
PREPARE = {"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": "U1", "DELAY": "3", "WAIT": "true"}


def test_a_prepare_is_stored_on_the_half_queue_with_its_real_destination() -> None:
    stored = rewrite(Message("Orders", b"x", tags="t", properties=PREPARE, sys_flag=0x1 | 0x4), 3, CONFIG)
    assert not isinstance(stored, PutResult)
    half, queue_id = stored
    assert (half.topic, queue_id, half.tags, half.body) == (tx.HALF_TOPIC, 0, "t", b"x")
    assert half.sys_flag == 0x1  # transaction bits reset to NOT_TYPE, the rest kept
    assert dict(half.properties) == {"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": "U1", "WAIT": "true",
                                     "__transactionId__": "U1", "REAL_TOPIC": "Orders", "REAL_QID": "3"}


@pytest.mark.parametrize("props, sys_flag", [({"TRAN_MSG": "TRUE", "PGROUP": "pg", "UNIQ_KEY": "U"}, 0),
                                              ({"PGROUP": "pg", "UNIQ_KEY": "U"}, 0x4)])
def test_either_the_property_or_the_prepared_bit_makes_a_prepare(props: dict[str, str], sys_flag: int) -> None:
    stored = rewrite(Message("Orders", b"x", properties=props, sys_flag=sys_flag), 0, CONFIG)
    assert not isinstance(stored, PutResult) and stored[0].topic == tx.HALF_TOPIC
    assert stored[0].properties["TRAN_MSG"] == "true"


@pytest.mark.parametrize("missing", ["UNIQ_KEY", "PGROUP"])
def test_a_prepare_without_its_ids_is_refused(missing: str) -> None:
    props = {k: v for k, v in PREPARE.items() if k != missing}
    refused = rewrite(Message("Orders", b"x", properties=props), 0, CONFIG)
    assert isinstance(refused, PutResult) and refused.status is PutStatus.MESSAGE_ILLEGAL


STORED_HALF = {k: v for k, v in PREPARE.items() if k != "DELAY"}  # a half loses its DELAY on prepare


@pytest.mark.parametrize("message", [
    Message("Orders", b"x", properties={"TRAN_MSG": "false"}),
    Message("Orders", b"x", properties=STORED_HALF, sys_flag=0x8),  # a commit keeps TRAN_MSG in its properties
    Message(tx.HALF_TOPIC, b"x", properties=STORED_HALF),            # a half re-appended for a check
    Message(tx.CHECK_MAX_TOPIC, b"x", properties=STORED_HALF),       # a discard
])
def test_what_the_transaction_actor_puts_is_left_where_it_is_sent(message: Message) -> None:
    assert rewrite(message, 2, CONFIG) == (message, 2)


def test_an_end_must_name_the_half_it_ends() -> None:
    props = {"PGROUP": "pg"}
    assert tx.end_refusal(props, 5, 900, "pg", 5, 900) is None
    assert "producer group" in (tx.end_refusal(props, 5, 900, "other", 5, 900) or "")
    assert "tranStateTableOffset" in (tx.end_refusal(props, 5, 900, "pg", 6, 900) or "")
    assert "commitLogOffset" in (tx.end_refusal(props, 5, 900, "pg", 5, 901) or "")


def test_commit_and_check_properties() -> None:
    half = {"REAL_TOPIC": "Orders", "REAL_QID": "2", "WAIT": "true", "TRAN_MSG": "true"}
    assert tx.real_destination(half) == ("Orders", 2)
    assert tx.real_destination({"REAL_TOPIC": "Orders"}) is None
    assert tx.committed_properties(half) == {**half, "WAIT": "false"}
    assert tx.committed_sys_flag(0x1 | 0x4) == 0x1 | 0x8
    once = tx.checked_properties(half)
    assert once["TRANSACTION_CHECK_TIMES"] == "1" and tx.checked_properties(once)["TRANSACTION_CHECK_TIMES"] == "2"


@given(st.lists(st.integers(0, 2**63 - 1), max_size=50))
def test_op_bodies_round_trip(offsets: list[int]) -> None:
    body = tx.op_body(offsets)
    assert body.endswith(b",") or not offsets
    assert tx.parse_op_body(body) == offsets


def test_op_bodies_as_rocketmq_writes_them() -> None:
    assert tx.op_body([17, 18, 20]) == b"17,18,20,"
    assert tx.parse_op_body(b"17") == [17]             # 4.x: one bare offset
    assert tx.parse_op_body(b"1,,x,2,") == [1, 2]      # pieces that are not offsets are skipped
    assert tx.parse_op_body(b"\xff\xfe") == []


@example(b"\x1c0")  # str.strip() takes the separator, int() did not: a ValueError out of a parser that skips
@example("1,\u00b2,3".encode())  # a superscript two is a digit to isdigit, not a number to int()
@given(st.binary(max_size=64))
def test_any_op_body_parses_without_raising(body: bytes) -> None:
    assert all(offset >= 0 for offset in tx.parse_op_body(body))
