"""The delay-level rule of ``mqstore.engine.put.rewrite``: a message with a ``DELAY`` level waits on
``SCHEDULE_TOPIC_XXXX``.

As RocketMQ's put hook (``transformDelayLevelMessage``): a message whose transaction type is none or
commit and whose ``DELAY`` property is a level above 0 is stored on ``SCHEDULE_TOPIC_XXXX``, on the
queue of its level, the level clamped to the table's last (``DELAY`` rewritten to it), with
``REAL_TOPIC`` and ``REAL_QID`` naming where it was sent; its consume-queue tags code is then its
delivery time. A ``DELAY`` that Java's ``Integer.parseInt`` refuses makes the message illegal, as
RocketMQ's ``getDelayTimeLevel`` throws. What a level is, its queue and its delay are
``mqstore.engine.delay.table``'s. The scheduler actor puts it back on its real topic when due
(``mqstore.actors.scheduler``).
"""

from __future__ import annotations

from dataclasses import replace

from mqstore.engine.config import StoreConfig
from mqstore.engine.delay.table import schedule_queue_id
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.log.record import (
    PROP_DELAY,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    SCHEDULE_TOPIC,
    SYSFLAG_TX_COMMIT,
    SYSFLAG_TX_MASK,
)


def delay_level_rule(message: Message, queue_id: int, config: StoreConfig) -> tuple[Message, int] | PutResult | None:
    delay = message.properties.get(PROP_DELAY)
    if delay is None or message.sys_flag & SYSFLAG_TX_MASK not in (0, SYSFLAG_TX_COMMIT):
        return None
    level = config.delay_levels.level_of(delay)
    if level is None:
        return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=f"DELAY {delay!r} is not a delay level (an integer)")
    if level == 0:
        return None
    properties = {**message.properties, PROP_DELAY: str(level), PROP_REAL_TOPIC: message.topic,
                  PROP_REAL_QID: str(queue_id)}
    return replace(message, topic=SCHEDULE_TOPIC, properties=properties), schedule_queue_id(level)
