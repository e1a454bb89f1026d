"""Stragglers moved, not waited for (RabbitMQ's merge, on RocketMQ's files; retention's
``move_stragglers_below``).

When the oldest commitlog file that anyone holds (``mqstore.engine.reclaim.consumed.HeldFile``) is held only by
messages ack-mode groups have not acked, and those messages' bytes are below a share of the file,
the writer appends a copy of each at the head of the log, on the system topic ``MOVED_TOPIC`` (one
queue): no offset-mode consumer of the real topic ever sees a copy, and the copy is a normal record
(body CRC, RocketMQ's layout) whose properties say where it came from:

=====================  ==============================================================================
``REAL_TOPIC``         the original's topic (RocketMQ's convention for a record parked on a system topic)
``REAL_QID``           the original's queue id
``MOVED_FROM``         ``phys,size,queue_offset,store_ms,sys_flag,prepared_tx_offset`` of the original
                       record: the first one, however often the message was moved since
``MOVED_REAL_TOPIC``   the original's own ``REAL_TOPIC``, when it had one (``MOVED_REAL_QID`` likewise)
=====================  ==============================================================================

Every other property (UNIQ_KEY, KEYS, TAGS, user properties) and the born time and host, flag and
reconsume times are the original's. ``presented`` turns a copy back into the original as a consumer
receives it: topic, queue id, queue offset, offsetMsgId, store time and properties.

The copies' consume queue is the durable record of the move: a queue index keeps pointing at the
original's offset (its msg id), and its reader finds the copy through ``MOVED_FROM``
(``mqstore.actors.reader.moved``), so a restarted reader re-reads the moved topic and knows every move.
Which file's stragglers move is ``mqstore.engine.reclaim.consumed.plan_move``'s decision.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mqstore.engine.log.message import Message
from mqstore.engine.log.record import PROP_CRC_KEY, PROP_REAL_QID, PROP_REAL_TOPIC, SYSFLAG_TX_MASK, Record

MOVED_TOPIC = "rmq_sys_moved"
MOVED_QUEUE_ID = 0
PROP_MOVED_FROM = "MOVED_FROM"
PROP_MOVED_REAL_TOPIC = "MOVED_REAL_TOPIC"
PROP_MOVED_REAL_QID = "MOVED_REAL_QID"
_OWN = (PROP_REAL_TOPIC, PROP_REAL_QID, PROP_MOVED_FROM, PROP_MOVED_REAL_TOPIC, PROP_MOVED_REAL_QID)


def same_message(earlier: Record, copy: Record) -> bool:
    """Whether ``copy`` is a copy of ``earlier`` (the original or an older copy): the same message
    once presented, whole-record CRCs aside. A reader trusts a copy only then, while the earlier
    one is still there: a record a producer put on the moved topic itself cannot stand in for one."""
    a, b = presented(earlier), presented(copy)
    return (a.topic, a.queue_id, a.queue_offset, a.phys_offset, a.body, _own_properties(a)) == (
        b.topic, b.queue_id, b.queue_offset, b.phys_offset, b.body, _own_properties(b))


def _own_properties(record: Record) -> dict[str, str]:
    return {k: v for k, v in record.properties.items() if k != PROP_CRC_KEY}


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a moved message was first stored."""

    phys_offset: int
    size: int
    queue_offset: int
    store_ms: int
    sys_flag: int
    prepared_tx_offset: int

    def encode(self) -> str:
        return ",".join(map(str, (self.phys_offset, self.size, self.queue_offset, self.store_ms, self.sys_flag,
                                  self.prepared_tx_offset)))


def origin_of(record: Record) -> Origin | None:
    """The original of a copy on ``MOVED_TOPIC``; None for any other record (or a malformed property)."""
    if record.topic != MOVED_TOPIC:
        return None
    fields = record.properties.get(PROP_MOVED_FROM, "").split(",")
    if len(fields) != 6 or not all(f.lstrip("-").isdecimal() for f in fields):
        return None
    phys_offset, size, queue_offset, store_ms, sys_flag, prepared = map(int, fields)
    if phys_offset < 0 or size <= 0 or queue_offset < 0 or PROP_REAL_TOPIC not in record.properties:
        return None
    if not record.properties.get(PROP_REAL_QID, "").isdecimal():
        return None
    return Origin(phys_offset, size, queue_offset, store_ms, sys_flag, prepared)


def copy_message(record: Record) -> Message:
    """The message the writer appends to move ``record`` (an original, or a copy moved again: its
    properties already say where it came from and stay as they are)."""
    props = {k: v for k, v in record.properties.items() if k != PROP_CRC_KEY}
    if record.topic != MOVED_TOPIC:
        for own, saved in ((PROP_REAL_TOPIC, PROP_MOVED_REAL_TOPIC), (PROP_REAL_QID, PROP_MOVED_REAL_QID)):
            if own in props:
                props[saved] = props[own]
        props[PROP_REAL_TOPIC] = record.topic
        props[PROP_REAL_QID] = str(record.queue_id)
        props[PROP_MOVED_FROM] = Origin(record.phys_offset, record.size, record.queue_offset, record.store_ms,
                                        record.sys_flag, record.prepared_tx_offset).encode()
    # a copy is a plain message: a prepared or committed transaction's flags stay with the original
    return Message(topic=MOVED_TOPIC, body=record.body, properties=props, flag=record.flag,
                   sys_flag=record.sys_flag & ~SYSFLAG_TX_MASK, born_ms=record.born_ms, born_host=record.born_host,
                   reconsume_times=record.reconsume_times)


def presented(record: Record) -> Record:
    """A copy as its original was stored (what a consumer receives); any other record as it is."""
    origin = origin_of(record)
    if origin is None:
        return record
    props = {k: v for k, v in record.properties.items() if k not in _OWN}
    for own, saved in ((PROP_REAL_TOPIC, PROP_MOVED_REAL_TOPIC), (PROP_REAL_QID, PROP_MOVED_REAL_QID)):
        if saved in record.properties:
            props[own] = record.properties[saved]
    return dataclasses.replace(record, topic=record.properties[PROP_REAL_TOPIC],
                               queue_id=int(record.properties[PROP_REAL_QID]), queue_offset=origin.queue_offset,
                               phys_offset=origin.phys_offset, size=origin.size, store_ms=origin.store_ms,
                               sys_flag=origin.sys_flag, prepared_tx_offset=origin.prepared_tx_offset,
                               properties=props)


__all__ = ["MOVED_QUEUE_ID", "MOVED_TOPIC", "Origin", "copy_message", "origin_of", "presented", "same_message"]
