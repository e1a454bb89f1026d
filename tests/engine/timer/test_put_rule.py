"""The timer rule of the put rewrite: RocketMQ 5's transform, given a clock."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.config import StoreConfig
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.put.rewrite import rewrite
from mqstore.engine.timer.put_rule import TIMER_TOPIC, TimerRule, slot_ms

NOW = 1_700_000_000_123
CONFIG = StoreConfig(timer_precision_ms=1000)
rule = TimerRule(lambda: NOW)


def _timed(**props: str) -> Message:
    return Message("Orders", b"body", tags="T", properties=props)


def test_a_delay_in_ms_parks_the_message_on_the_timer_topic_with_its_real_queue() -> None:
    outcome = rule(_timed(TIMER_DELAY_MS="5000", x="y"), 3, CONFIG)
    assert isinstance(outcome, tuple)
    message, queue_id = outcome
    assert (message.topic, queue_id, message.tags, message.body) == (TIMER_TOPIC, 0, "T", b"body")
    assert message.properties == {"TIMER_DELAY_MS": "5000", "x": "y", "TIMER_OUT_MS": str(1_700_000_005_000),
                                  "REAL_TOPIC": "Orders", "REAL_QID": "3"}


def test_seconds_come_before_ms_and_ms_before_an_absolute_time() -> None:
    both = rule(_timed(TIMER_DELAY_SEC="2", TIMER_DELAY_MS="9000", TIMER_DELIVER_MS=str(NOW + 50_000)), 0, CONFIG)
    assert isinstance(both, tuple) and both[0].properties["TIMER_OUT_MS"] == str(1_700_000_002_000)
    deliver = rule(_timed(TIMER_DELIVER_MS=str(NOW + 50_000)), 0, CONFIG)
    assert isinstance(deliver, tuple) and deliver[0].properties["TIMER_OUT_MS"] == str(1_700_000_050_000)


@given(st.integers(1, 10**12), st.sampled_from([100, 200, 500, 1000]))
def test_the_slot_is_never_after_the_delivery_time_and_one_step_covers_it(deliver_ms: int, precision: int) -> None:
    slot = slot_ms(deliver_ms, precision)
    assert slot % precision == 0 and slot < deliver_ms <= slot + precision  # due at slot + P: never early


@pytest.mark.parametrize("props", [{"TIMER_DELAY_MS": "0"}, {"TIMER_DELAY_SEC": "-3"},
                                   {"TIMER_DELIVER_MS": str(NOW)}, {"other": "1"}])
def test_a_time_not_in_the_future_or_no_timer_leaves_the_message_as_it_is(props: dict[str, str]) -> None:
    assert rule(_timed(**props), 1, CONFIG) is None


@pytest.mark.parametrize("props", [{"TIMER_DELAY_MS": "soon"}, {"TIMER_DELAY_SEC": "1.5"}, {"TIMER_DELAY_MS": ""},
                                   {"TIMER_DELIVER_MS": "9" * 20}, {"TIMER_DELAY_SEC": str(259_201)}])
def test_bad_numbers_and_delays_past_the_maximum_are_refused_with_the_reason(props: dict[str, str]) -> None:
    outcome = rule(_timed(**props), 1, CONFIG)
    assert isinstance(outcome, PutResult) and outcome.status is PutStatus.MESSAGE_ILLEGAL
    assert next(iter(props)) in outcome.reason


def test_the_maximum_delay_itself_is_legal() -> None:
    assert isinstance(rule(_timed(TIMER_DELAY_SEC=str(259_200)), 0, CONFIG), tuple)


@pytest.mark.parametrize("message", [
    _timed(TIMER_DELAY_MS="5000", DELAY="3"),                   # a delay level wins
    _timed(TIMER_DELAY_MS="5000", TIMER_OUT_MS="1"),            # parked already (a roll coming back)
    replace(_timed(TIMER_DELAY_MS="5000"), topic=TIMER_TOPIC),  # the timer topic itself
    replace(_timed(TIMER_DELAY_MS="5000"), sys_flag=0x4),       # a prepared transaction
])
def test_messages_rocketmq_does_not_re_time_are_left_alone(message: Message) -> None:
    assert rule(message, 0, CONFIG) is None


def test_timers_switched_off_are_refused() -> None:
    outcome = rule(_timed(TIMER_DELAY_MS="5000"), 0, replace(CONFIG, timer_wheel_enable=False))
    assert isinstance(outcome, PutResult) and "timer_wheel_enable" in outcome.reason
    assert outcome.status is PutStatus.WHEEL_TIMER_NOT_ENABLE  # RocketMQ's status; SEND answers SYSTEM_ERROR


def test_the_writers_rewrite_applies_the_timer_rule() -> None:
    outcome = rewrite(_timed(TIMER_DELAY_SEC="30"), 2, CONFIG)
    assert isinstance(outcome, tuple) and outcome[0].topic == TIMER_TOPIC and outcome[1] == 0


@pytest.mark.parametrize(("field", "value"), [("timer_precision_ms", 300), ("timer_max_delay_sec", 0),
                                              ("timer_roll_window_slot", 1), ("timer_log_file_size", 100)])
def test_timer_settings_are_validated(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        replace(CONFIG, **{field: value}).validate()
