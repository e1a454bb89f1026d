"""The timer rule of ``mqstore.engine.put.rewrite``: RocketMQ 5's transform of a timer message on put.

A NOT / COMMIT message carrying ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` or ``TIMER_DELIVER_MS`` (in
that priority), and neither ``DELAY`` > 0 (a delay level wins) nor ``TIMER_OUT_MS`` (already parked:
a roll coming back), gets a delivery time ``deliver_ms``:

- not a number: refused, MESSAGE_ILLEGAL with the reason (RocketMQ: WHEEL_TIMER_MSG_ILLEGAL, which
  SEND answers MESSAGE_ILLEGAL); timers switched off ([store] timer_wheel_enable): refused with
  WHEEL_TIMER_NOT_ENABLE, which the remoting front answers SYSTEM_ERROR as RocketMQ's SEND does;
- not in the future: stored as the normal message it is;
- more than ``timer_max_delay_sec`` ahead: refused, MESSAGE_ILLEGAL;
- else rounded down to the precision P (a multiple of P goes one P down: slot T is delivered once
  ``now >= T + P``, never before ``deliver_ms`` and about one P after it at most), kept in
  ``TIMER_OUT_MS`` beside ``REAL_TOPIC`` / ``REAL_QID``, and stored on ``rmq_sys_wheel_timer`` queue 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from mqstore.engine.config import StoreConfig
from mqstore.engine.java.numbers import parse_long
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.log.record import PROP_DELAY, SYSFLAG_TX_COMMIT, SYSFLAG_TX_MASK

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_QUEUE_COUNT = 1
PROP_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROP_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROP_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROP_TIMER_OUT_MS = "TIMER_OUT_MS"
PROP_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROP_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROP_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROP_REAL_TOPIC = "REAL_TOPIC"
PROP_REAL_QID = "REAL_QID"
# mqstore's: on a copy the timer actor puts, the commitlog offset of the rmq_sys_wheel_timer record it
# came from; how a restarted actor finds what it delivered just before it was killed
PROP_TIMER_FROM_PHYS = "TIMER_FROM_PHYS_OFFSET"
CLIENT_PROPS = (PROP_TIMER_DELAY_SEC, PROP_TIMER_DELAY_MS, PROP_TIMER_DELIVER_MS)


def is_timer_message(properties: Mapping[str, str]) -> bool:
    return any(name in properties for name in CLIENT_PROPS)


def slot_ms(deliver_ms: int, precision_ms: int) -> int:
    """RocketMQ's rounding of a delivery time to its wheel slot."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def _delay_level(properties: Mapping[str, str]) -> int:
    text = properties.get(PROP_DELAY)
    return (parse_long(text) or 0) if text is not None else 0


class TimerRule:
    """The rule, with the clock it reads ``now`` from."""

    def __init__(self, now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self, message: Message, queue_id: int, config: StoreConfig) -> tuple[Message, int] | PutResult | None:
        props = message.properties
        if (not is_timer_message(props) or message.topic == TIMER_TOPIC or PROP_TIMER_OUT_MS in props
                or message.sys_flag & SYSFLAG_TX_MASK not in (0, SYSFLAG_TX_COMMIT)
                or _delay_level(props) > 0):
            return None
        if not config.timer_wheel_enable:
            return PutResult(PutStatus.WHEEL_TIMER_NOT_ENABLE,
                             reason="timer messages are off here ([store] timer_wheel_enable = false)")
        now = self.now_ms()
        name = next(n for n in CLIENT_PROPS if n in props)
        value = parse_long(props[name])
        if value is None:
            return _illegal(f"{name} must be an integer, got {props[name]!r}")
        deliver_ms = now + value * 1000 if name == PROP_TIMER_DELAY_SEC else now + value if \
            name == PROP_TIMER_DELAY_MS else value
        if deliver_ms <= now:
            return None
        if deliver_ms - now > config.timer_max_delay_sec * 1000:
            return _illegal(f"{name}={props[name]} delivers {deliver_ms - now} ms from now, past the "
                            f"maximum delay of {config.timer_max_delay_sec} s ([store] timer_max_delay_sec)")
        parked = {**props, PROP_TIMER_OUT_MS: str(slot_ms(deliver_ms, config.timer_precision_ms)),
                  PROP_REAL_TOPIC: message.topic, PROP_REAL_QID: str(queue_id)}
        return replace(message, topic=TIMER_TOPIC, properties=parked), 0


def _illegal(reason: str) -> PutResult:
    return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=reason)


timer_rule = TimerRule()
