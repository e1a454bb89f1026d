"""Java's ``String.hashCode`` and the two hashes RocketMQ derives from it.

RocketMQ keys its consume-queue tag codes and its index slots on the JVM string hash, computed over
UTF-16 code units with 32-bit wraparound: ``h = 31 * h + unit``. Characters outside the BMP count as
two units (a surrogate pair), exactly as Java sees them.
"""

from __future__ import annotations

_MASK32 = 0xFFFFFFFF
_INT_MIN = -(1 << 31)


def java_hash(s: str) -> int:
    """Java ``String.hashCode()`` as a signed 32-bit int."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & _MASK32
    else:
        units = s.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h - (1 << 32) if h >= (1 << 31) else h


def tags_code(tags: str | None) -> int:
    """The consume-queue tagsCode of a TAGS value: 0 when absent, else its Java hash widened to a long."""
    if not tags:
        return 0
    return java_hash(tags)


def index_hash(key: str) -> int:
    """IndexFile key hash: ``abs(hashCode)``, with Integer.MIN_VALUE (whose abs overflows) mapped to 0."""
    h = java_hash(key)
    return 0 if h == _INT_MIN else abs(h)
