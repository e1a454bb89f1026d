"""RocketMQ's delay levels: the ``messageDelayLevel`` table, the level a ``DELAY`` asks for, the
schedule queue it waits on, and the delivery time it gives a record. Every rule about levels is here;
the put rule (``levels``), the scheduler and the ack queues' redelivery ask it.

The table is a string of space-separated tokens, ``"1s 5s 10s 30s 1m ... 2h"``; token i (0-based) is
level i + 1, its last character the unit (s, m, h, d) and the rest a whole number (RocketMQ's
``parseDelayLevel``). A ``DELAY`` property is Java's ``Integer.parseInt`` of its text (a text it
refuses makes the message illegal); 0 or below asks for no delay, and a level past the table's last
is its last (RocketMQ clamps, in ``transformDelayLevelMessage`` and ``computeDeliverTimestamp``).
Level n waits on queue n - 1 of ``SCHEDULE_TOPIC_XXXX``, one queue per level. A record there with a
``DELAY`` property gets its delivery time as its consume-queue tags code: store time + the level's
delay. Every
path that computes a tags code (the writer's dispatch, re-dispatch, recovery, verify, the pipeline)
calls ``tags_code_of`` with the table of the store: the broker's ``[store] message_delay_level``,
saved with the store (``DELAY_LEVEL_FILE``) so offline tools read the one the broker used.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.errors import MqstoreError
from mqstore.engine.java.jhash import tags_code
from mqstore.engine.java.numbers import parse_int, parse_long
from mqstore.engine.log.record import PROP_DELAY, PROP_TAGS, SCHEDULE_TOPIC
from mqstore.engine.meta.metafile import read_with_backup, write_atomic

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DELAY_LEVEL_FILE = "config/messageDelayLevel.json"
UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


class DelayLevelError(MqstoreError, ValueError):
    """A ``message_delay_level`` string RocketMQ would not parse."""


@dataclass(frozen=True, slots=True)
class DelayLevels:
    """The delay of each level in ms; level n is ``delays_ms[n - 1]``."""

    text: str
    delays_ms: tuple[int, ...]

    @property
    def max_level(self) -> int:
        """The table's last level, and the schedule topic's queue count (one queue per level)."""
        return len(self.delays_ms)

    @property
    def levels(self) -> range:
        """Every level, 1..max_level."""
        return range(1, self.max_level + 1)

    def delay_ms(self, level: int) -> int:
        """The delay of ``level`` (1 or above; past the table's last, the last's)."""
        return self.delays_ms[min(level, self.max_level) - 1]

    def level_of(self, delay_property: str) -> int | None:
        """The level a ``DELAY`` property puts a message on, clamped to the table's last; 0 when it
        asks for none (0 or below); None when Java's ``Integer.parseInt`` refuses it."""
        level = parse_level(delay_property)
        if level is None:
            return None
        return min(level, self.max_level) if level > 0 else 0

    def delivery_ms(self, delay_property: str, store_ms: int) -> int | None:
        """The delivery time of a schedule-topic record stored at ``store_ms``; None when its DELAY
        is not a level above 0 (its tags code is then its tags' hash)."""
        level = self.level_of(delay_property)
        return store_ms + self.delay_ms(level) if level else None


def parse_level(text: str) -> int | None:
    """Java's ``Integer.parseInt`` of a DELAY property: None where it would throw."""
    return parse_int(text)


def schedule_queue_id(level: int) -> int:
    """The queue of ``SCHEDULE_TOPIC_XXXX`` that ``level`` waits on."""
    return level - 1


def queue_level(queue_id: int) -> int:
    """The level whose messages wait on schedule queue ``queue_id``."""
    return queue_id + 1


@functools.lru_cache(maxsize=8)
def parse_delay_levels(text: str) -> DelayLevels:
    """RocketMQ's ``parseDelayLevel``: split on single spaces, unit last. Raises DelayLevelError."""
    delays: list[int] = []
    for n, token in enumerate(text.split(" "), start=1):
        unit, number = UNIT_MS.get(token[-1:]), token[:-1]
        if unit is None:
            raise DelayLevelError(f"message_delay_level token {n} {token!r} does not end in one of s, m, h, d")
        if parse_long(number) is None:
            raise DelayLevelError(f"message_delay_level token {n} {token!r} is not a whole number and a unit")
        delays.append(int(number) * unit)
    return DelayLevels(text, tuple(delays))


DEFAULT_DELAY_LEVELS = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)


def tags_code_of(topic: str, properties: Mapping[str, str], store_ms: int, levels: DelayLevels) -> int:
    """A record's consume-queue tags code: its delivery time on the schedule topic, else its tags' hash."""
    if topic == SCHEDULE_TOPIC and PROP_DELAY in properties:
        delivery = levels.delivery_ms(properties[PROP_DELAY], store_ms)
        if delivery is not None:
            return delivery
    return tags_code(properties.get(PROP_TAGS))


def save_delay_levels(store_dir: Path, levels: DelayLevels) -> None:
    """Keep the table the broker runs with beside the store (written only when it changes)."""
    if read_delay_levels(store_dir) != levels:
        write_atomic(store_dir / DELAY_LEVEL_FILE, json.dumps({"messageDelayLevel": levels.text}).encode())


def read_delay_levels(store_dir: Path) -> DelayLevels:
    """The table saved with the store; RocketMQ's default for a store without one."""
    saved = read_with_backup(store_dir / DELAY_LEVEL_FILE, _decode)
    return saved if saved is not None else DEFAULT_DELAY_LEVELS


def _decode(data: bytes) -> DelayLevels:
    text = json.loads(data)["messageDelayLevel"]
    if not isinstance(text, str):
        raise ValueError(f"messageDelayLevel is {text!r}, not a string")
    return parse_delay_levels(text)
