"""Where a message is stored when it is not where its producer sent it: RocketMQ's rewrites on put.

RocketMQ's broker moves some messages to a system topic as they are put, keeping the topic and
queue they were sent to in the ``REAL_TOPIC`` and ``REAL_QID`` properties: a delay level to
``SCHEDULE_TOPIC_XXXX``, a timer property to the timer topic, a transaction's half message to
``RMQ_SYS_TRANS_HALF_TOPIC``. An actor later puts it again on its real topic.

Every front reaches the commitlog through the writer's ``send`` parse (ipc clients and the remoting
front alike), which calls ``rewrite`` once a message's queue is chosen: one place decides where a
message lands. Each feature adds its rule to ``RULES``; a rule, given the store's settings, returns
the message and queue it is stored as, ``None`` when it does not apply, or a ``PutResult`` refusing
the message.
"""

from __future__ import annotations

from collections.abc import Callable

from mqstore.engine.config import StoreConfig
from mqstore.engine.delay.levels import delay_level_rule
from mqstore.engine.log.message import Message, PutResult
from mqstore.engine.put.transactions import half_message_rule
from mqstore.engine.timer.put_rule import timer_rule

Rule = Callable[[Message, int, StoreConfig], "tuple[Message, int] | PutResult | None"]

# a half message first: it loses its DELAY (RocketMQ's pitfall #1540) before the delay rule could move it;
# a delay level wins over timer properties, as RocketMQ's put hook has it
RULES: tuple[Rule, ...] = (half_message_rule, delay_level_rule, timer_rule)


def rewrite(message: Message, queue_id: int, config: StoreConfig) -> tuple[Message, int] | PutResult:
    """The message and queue to store, after the first rule that applies; unchanged when none does."""
    for rule in RULES:
        outcome = rule(message, queue_id, config)
        if outcome is not None:
            return outcome
    return message, queue_id
