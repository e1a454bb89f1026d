"""What ``mqstore produce`` puts on every message it sends besides the body: ``--tags``, ``--keys``,
``--property K=V``, ``--delay-level N`` and ``--deliver-at TIME``, checked before anything is sent.

A property the broker reserves is refused with the reason (``RESERVED_PROPERTIES``): the names
RocketMQ's ``MessageConst`` keeps for itself that mqstore reads or writes, and mqstore's own (a
dead letter's origin, a moved record's). Those with an option of their own (DELAY, the timer's,
KEYS, TAGS) name the option.

Delays follow the broker's rules (``mqstore.engine.delay.levels``, ``mqstore.engine.timer.put_rule``):
``--delay-level N`` is RocketMQ's level N of the store's delay table (1s 5s 10s ... 2h by default,
levels 1 to 18); ``--deliver-at`` sets ``TIMER_DELIVER_MS``, RocketMQ 5's timer message, which the
broker holds until that time: a time not in the future is stored as a plain message and delivered at
once, and a time past ``[store] timer_max_delay_sec`` is refused by the broker, with its reason.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from mqstore.engine.delay.table import read_delay_levels
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.record import (
    PROP_CRC_KEY,
    PROP_DELAY,
    PROP_KEYS,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TAGS,
    PROP_UNIQ_KEY,
)
from mqstore.engine.put.transactions import (
    PROP_CHECK_IMMUNITY,
    PROP_CHECK_TIMES,
    PROP_PGROUP,
    PROP_PREPARED_QUEUE_OFFSET,
    PROP_TRAN_MSG,
    PROP_TRANSACTION_ID,
    PROP_WAIT,
)
from mqstore.engine.reclaim.move import PROP_MOVED_FROM, PROP_MOVED_REAL_QID, PROP_MOVED_REAL_TOPIC
from mqstore.engine.timer.put_rule import (
    PROP_TIMER_DELAY_MS,
    PROP_TIMER_DELAY_SEC,
    PROP_TIMER_DELIVER_MS,
    PROP_TIMER_DEQUEUE_MS,
    PROP_TIMER_ENQUEUE_MS,
    PROP_TIMER_FROM_PHYS,
    PROP_TIMER_OUT_MS,
    PROP_TIMER_ROLL_TIMES,
)
from mqstore.scripts.cli.timestamps import epoch_ms

_BROKER = "the broker sets it"
_TRANSACTION = "it marks a transaction's message: send those with Producer.send_transactional"
_DEAD_LETTER = "the broker sets it on a dead letter, to say where it came from"
RESERVED_PROPERTIES: dict[str, str] = {
    PROP_DELAY: "give the delay with --delay-level",
    PROP_TIMER_DELIVER_MS: "give the delivery time with --deliver-at",
    PROP_TIMER_DELAY_SEC: "give the delivery time with --deliver-at",
    PROP_TIMER_DELAY_MS: "give the delivery time with --deliver-at",
    PROP_KEYS: "give keys with --keys",
    PROP_TAGS: "give the tag with --tags",
    PROP_UNIQ_KEY: "the client sets each message's unique key",
    PROP_CRC_KEY: "the broker keeps it for the properties' CRC",
    PROP_REAL_TOPIC: _BROKER, PROP_REAL_QID: _BROKER, PROP_WAIT: _BROKER,
    PROP_TRAN_MSG: _TRANSACTION, PROP_PGROUP: _TRANSACTION, PROP_TRANSACTION_ID: _TRANSACTION,
    PROP_CHECK_IMMUNITY: _TRANSACTION, PROP_CHECK_TIMES: _BROKER, PROP_PREPARED_QUEUE_OFFSET: _BROKER,
    PROP_TIMER_OUT_MS: _BROKER, PROP_TIMER_ENQUEUE_MS: _BROKER, PROP_TIMER_DEQUEUE_MS: _BROKER,
    PROP_TIMER_ROLL_TIMES: _BROKER, PROP_TIMER_FROM_PHYS: _BROKER, "TIMER_DEL_UNIQKEY": _BROKER,
    "DELAY_OFFSET": _BROKER, PROP_MOVED_FROM: _BROKER, PROP_MOVED_REAL_TOPIC: _BROKER, PROP_MOVED_REAL_QID: _BROKER,
    "MIN_OFFSET": _BROKER, "MAX_OFFSET": _BROKER, "INNER_NUM": _BROKER, "INNER_BASE": _BROKER,
    "DUP_INFO": _BROKER, "INNER_MULTI_DISPATCH": _BROKER, "INNER_MULTI_QUEUE_OFFSET": _BROKER,
    "RETRY_TOPIC": _BROKER, "RECONSUME_TIME": _BROKER, "ORIGIN_MESSAGE_ID": _BROKER, "MSG_REGION": _BROKER,
    "TRACE_ON": _BROKER,
    "ORIGIN_TOPIC": _DEAD_LETTER, "ORIGIN_QUEUE": _DEAD_LETTER, "ORIGIN_OFFSET": _DEAD_LETTER,
    "RECONSUME_TIMES": _DEAD_LETTER,
}
_SEPARATORS = ("\x01", "\x02")


class MessageOptionError(MqstoreError, ValueError):
    """An option of ``produce`` that no message may carry: the reason says which and why."""


@dataclass(frozen=True, slots=True)
class MessageOptions:
    """Tags, keys and properties every message of one ``produce`` carries."""

    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def delayed(self) -> bool:
        """Held by the broker before delivery: such sends go through ``send_batch``, never the encoded path."""
        return PROP_DELAY in self.properties or PROP_TIMER_DELIVER_MS in self.properties


def add_message_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--tags", help="the messages' tag")
    cmd.add_argument("--keys", nargs="+", action="extend", metavar="KEY",
                     help="the messages' keys (query --key finds them); several after one --keys, or --keys again")
    cmd.add_argument("--property", dest="properties", action="append", metavar="K=V",
                     help="a user property on every message (again for more); names the broker reserves are refused")
    delay = cmd.add_mutually_exclusive_group()
    delay.add_argument("--delay-level", type=int, metavar="N",
                       help="RocketMQ's delay level N of the store's table (1s 5s 10s 30s 1m ... 2h by default: "
                            "1 to 18)")
    delay.add_argument("--deliver-at", type=epoch_ms, metavar="TIME",
                       help="deliver at TIME (epoch ms or ISO 8601; a time not in the future: at once)")


def message_options(args: argparse.Namespace, store: Path) -> MessageOptions:
    """The options as one ``MessageOptions``; raises MessageOptionError with the reason. The delay
    table is the one saved with ``store`` (RocketMQ's default where there is none)."""
    properties: dict[str, str] = {}
    for text in args.properties or ():
        name, eq, value = text.partition("=")
        if not eq or not name or not value:
            raise MessageOptionError(f"--property {text!r} is not K=V with a name and a value")
        if any(c in name or c in value for c in _SEPARATORS):
            raise MessageOptionError(f"--property {name!r}: the characters \\x01 and \\x02 separate properties")
        reason = RESERVED_PROPERTIES.get(name)
        if reason is not None:
            raise MessageOptionError(f"--property {name} is a name the broker reserves: {reason}")
        properties[name] = value
    keys = tuple(key for text in args.keys or () for key in text.split())
    if any(c in key for key in keys for c in _SEPARATORS):
        raise MessageOptionError("--keys: the characters \\x01 and \\x02 separate properties")
    if args.tags is not None and (not args.tags or any(c in args.tags for c in _SEPARATORS)):
        raise MessageOptionError(f"--tags {args.tags!r}: a tag is not empty and has neither \\x01 nor \\x02")
    if args.delay_level is not None:
        levels = read_delay_levels(store)
        if not 1 <= args.delay_level <= levels.max_level:
            raise MessageOptionError(f"--delay-level {args.delay_level}: the store's delay table has levels 1 to "
                                     f"{levels.max_level} ({levels.text})")
        properties[PROP_DELAY] = str(args.delay_level)
    if args.deliver_at is not None:
        properties[PROP_TIMER_DELIVER_MS] = str(args.deliver_at)
    return MessageOptions(args.tags, keys, properties)
