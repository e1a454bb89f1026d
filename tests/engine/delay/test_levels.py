"""The delay-level put rule (mqstore.engine.put.rewrite): which messages go to SCHEDULE_TOPIC_XXXX, on which
queue, with which properties; and the batch check that keeps DELAY out of producer-encoded records."""

from __future__ import annotations

from mqstore.engine.config import StoreConfig
from mqstore.engine.delay.levels import delay_level_rule
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.log.record import SCHEDULE_TOPIC, SYSFLAG_TX_COMMIT, SYSFLAG_TX_PREPARED
from mqstore.engine.put.rewrite import rewrite

SHORT = StoreConfig(message_delay_level="1s 2s 3s")


def test_a_delay_level_moves_the_message_to_its_schedule_queue() -> None:
    message = Message("Orders", b"b", tags="T", properties={"DELAY": "2", "K": "v"})
    stored, queue_id = rewrite(message, 5, SHORT)  # type: ignore[misc]
    assert (stored.topic, queue_id, stored.body, stored.tags) == (SCHEDULE_TOPIC, 1, b"b", "T")
    assert stored.properties == {"DELAY": "2", "K": "v", "REAL_TOPIC": "Orders", "REAL_QID": "5"}


def test_a_level_past_the_table_is_clamped_and_written_back() -> None:
    stored, queue_id = rewrite(Message("Orders", b"b", properties={"DELAY": "18"}), 0, SHORT)  # type: ignore[misc]
    assert (queue_id, stored.properties["DELAY"]) == (2, "3")


def test_what_stays_where_it_was_sent() -> None:
    for props in ({}, {"DELAY": "0"}, {"DELAY": "-3"}):
        message = Message("Orders", b"b", properties=props)
        assert rewrite(message, 1, SHORT) == (message, 1)
    # a prepared message is not the delay rule's (the half rule before it stores it, DELAY dropped)
    prepared = Message("Orders", b"b", properties={"DELAY": "1"}, sys_flag=SYSFLAG_TX_PREPARED)
    assert delay_level_rule(prepared, 1, SHORT) is None
    committed = Message("Orders", b"b", properties={"DELAY": "1"}, sys_flag=SYSFLAG_TX_COMMIT)
    assert rewrite(committed, 1, SHORT)[0].topic == SCHEDULE_TOPIC  # type: ignore[union-attr]


def test_a_delay_java_cannot_parse_is_illegal() -> None:
    outcome = rewrite(Message("Orders", b"b", properties={"DELAY": "soon"}), 0, SHORT)
    assert isinstance(outcome, PutResult) and outcome.status is PutStatus.MESSAGE_ILLEGAL
