"""Topics only the broker writes: RocketMQ's ``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`` and mqstore's own.

A client's message is moved onto these by the put rules (``mqstore.engine.put.rewrite``: a delay
level onto ``SCHEDULE_TOPIC_XXXX``, a timer onto ``rmq_sys_wheel_timer``, a half message onto
``RMQ_SYS_TRANS_HALF_TOPIC``), and the broker's own actors write them directly (op records, discarded
halves, rolled timers, moved stragglers' copies). A client that names one itself would plant a record
those actors trust (a schedule entry without ``REAL_TOPIC``, a forged op record), so every front door
refuses it, as RocketMQ's send processor does: NO_PERMISSION, "Sending message to topic[X] is forbidden."

Refused: the names below, every ``rmq_sys_*`` topic (RocketMQ 5's system prefix) and every
``RMQ_SYS_TRANS_*`` one (the transaction topics). ``RMQ_SYS_TRACE_TOPIC`` stays open: clients with
message tracing on send there.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqstore.engine.log.record import SCHEDULE_TOPIC
from mqstore.engine.meta.topics import BROKER_MADE_PREFIXES
from mqstore.engine.put.transactions import CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC
from mqstore.engine.reclaim.move import MOVED_TOPIC
from mqstore.engine.timer.put_rule import TIMER_TOPIC

SYSTEM_TOPIC_PREFIXES = ("rmq_sys_", "RMQ_SYS_TRANS_")


@dataclass(frozen=True, slots=True)
class ReservedTopics:
    """Topic names and prefixes a client may not send to, create or delete: ``topic in RESERVED``."""

    names: frozenset[str]
    prefixes: tuple[str, ...]

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and (topic in self.names or topic.startswith(self.prefixes))

    def refusal(self, topic: str) -> str | None:
        """RocketMQ's remark for a send to a reserved topic, or None when the topic is open."""
        return f"Sending message to topic[{topic}] is forbidden." if topic in self else None


NOT_ALLOWED_SEND_TOPICS = ReservedTopics(
    frozenset({SCHEDULE_TOPIC, HALF_TOPIC, OP_TOPIC, CHECK_MAX_TOPIC, "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
               TIMER_TOPIC, MOVED_TOPIC}),
    SYSTEM_TOPIC_PREFIXES)


# what listings and the dashboard fold away unless asked: the topics only the broker writes, every
# ``RMQ_SYS_*`` one (the trace topic too) and the retry and dead-letter topics the broker makes for groups
_SYSTEM_PREFIXES = (*SYSTEM_TOPIC_PREFIXES, "RMQ_SYS_", *BROKER_MADE_PREFIXES)


def is_system_topic(topic: str) -> bool:
    """A topic of the broker's own (delays, timers, transactions, moved stragglers, retries, dead letters)."""
    return topic in NOT_ALLOWED_SEND_TOPICS.names or topic.startswith(_SYSTEM_PREFIXES)
