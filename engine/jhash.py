"""Java's ``String.hashCode`` and the two hashes RocketMQ derives from it.

RocketMQ keys its consume-queue tag codes and its index slots on the JVM string hash, computed over
UTF-16 code units with 32-bit wraparound: ``h = 31 * h + unit``. Characters outside the BMP count as
two units (a surrogate pair), exactly as Java sees them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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


def java_hashes(strings: Sequence[str]) -> list[int]:
    """``java_hash`` of many strings at once: h = sum(unit_i * 31^(n-1-i)) mod 2^32, with numpy's
    wrapping uint64 products (2^32 divides 2^64, so the low 32 bits come out exact)."""
    if not strings:
        return []
    if not all(s.isascii() for s in strings):
        return [java_hash(s) for s in strings]
    data = np.frombuffer("".join(strings).encode("ascii"), dtype=np.uint8).astype(np.uint64)
    lengths = np.fromiter((len(s) for s in strings), np.int64, len(strings))
    ends = np.cumsum(lengths)
    powers = np.full(max(int(lengths.max()), 1), 31, np.uint64)
    powers[0] = 1
    powers = np.cumprod(powers)  # 31^0, 31^1, ... mod 2^64
    exponent = np.repeat(ends, lengths) - 1 - np.arange(len(data))
    terms = data * powers[exponent]
    h = np.zeros(len(strings), np.uint64)
    filled = lengths > 0
    if len(data):
        h[filled] = np.add.reduceat(terms, (ends - lengths)[filled]) & np.uint64(_MASK32)
    signed = h.astype(np.int64)
    signed[signed >= (1 << 31)] -= 1 << 32
    return signed.tolist()


def index_hashes(keys: Sequence[str]) -> list[int]:
    """``index_hash`` of many keys at once."""
    return [0 if h == _INT_MIN else abs(h) for h in java_hashes(keys)]
