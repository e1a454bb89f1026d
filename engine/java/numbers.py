"""Java's ``Long.parseLong`` and ``Integer.parseInt`` over RocketMQ's string properties (``DELAY``,
``TIMER_DELAY_MS``, ``CHECK_IMMUNITY_TIME_IN_SECONDS`` ...): None where Java would throw.

Java takes an optional sign and ASCII digits (leading zeros too) within the type's range; no spaces,
no decimal point, nothing empty.
"""

from __future__ import annotations

import re

_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def _parse(text: str, low: int, high: int) -> int | None:
    if not _INTEGER_TEXT.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


def parse_long(text: str) -> int | None:
    return _parse(text, LONG_MIN, LONG_MAX)


def parse_int(text: str) -> int | None:
    return _parse(text, INT_MIN, INT_MAX)
