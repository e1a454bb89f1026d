"""Java's ``String.hashCode``, one string at a time and many at once, and the tags code.

RocketMQ keys its consume-queue tag codes, its index slots and its shard picks on the JVM string
hash, computed over UTF-16 code units with 32-bit wraparound: ``h = 31 * h + unit``. Characters
outside the BMP count as two units (a surrogate pair), exactly as Java sees them. Strings are hashed
by the compiled kernel (``engine._native.java_hashes``); the matrix forms below hash ASCII text
already gathered from records' bytes (re-dispatch's columns). The tags code is
here; the index's key hash, ``abs`` of the hash of ``topic#key``, is ``engine.keyindex.keys``'; the
shard rule is ``engine.queue_selector``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _native

_MASK32 = 0xFFFFFFFF


def java_hash(s: str) -> int:
    """Java ``String.hashCode()`` as a signed 32-bit int."""
    return _native.java_hash(s)


def tags_code(tags: str | None) -> int:
    """The consume-queue tagsCode of a TAGS value: 0 when absent, else its Java hash widened to a long."""
    if not tags:
        return 0
    return java_hash(tags)


def java_hashes(strings: Sequence[str]) -> list[int]:
    """``java_hash`` of many strings at once (one kernel call); a lone surrogate is one unit, as in Java."""
    out = np.empty(len(strings), np.int64)
    _native.java_hashes(strings if isinstance(strings, list) else list(strings), out)
    return out.tolist()


_POW31 = np.cumprod(np.concatenate(([1], np.full(1 << 13, 31))).astype(np.uint64)) & np.uint64(_MASK32)
# 31 is odd, so it has an inverse modulo 2^32 (Newton's iteration doubles the correct low bits each step)
_INV31 = 31
for _ in range(5):
    _INV31 = (_INV31 * (2 - 31 * _INV31)) & _MASK32
_INV_POW31 = np.cumprod(np.concatenate(([1], np.full(1 << 13, _INV31))).astype(np.uint64)) & np.uint64(_MASK32)
MAX_ROW_WIDTH = 1 << 13  # float64 sums of width * 255 * 2^32 stay exact below 2^53


def java_hashes_of_rows(rows: np.ndarray[Any, Any], lengths: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``java_hash`` of ASCII byte strings given as the rows of a (n, width) uint8 matrix, each
    left-aligned with zeros after its ``lengths`` bytes, as unsigned 32-bit values in int64.

    The polynomial sum over the padded row is one float64 matrix-vector product (each term is below
    2^40, so the sums are exact); trailing zeros multiplied the hash by 31 per byte, which the
    inverse of 31 modulo 2^32 takes back."""
    n, width = rows.shape
    if width > MAX_ROW_WIDTH:
        raise ValueError(f"rows of {width} bytes are wider than {MAX_ROW_WIDTH}")
    if n == 0 or width == 0:
        return np.zeros(n, np.int64)
    powers = _POW31[width - 1::-1][:width].astype(np.float64)
    padded = np.fmod(rows.astype(np.float64) @ powers, float(1 << 32)).astype(np.uint64)
    unpadded: np.ndarray[Any, Any] = (padded * _INV_POW31[width - lengths]) & np.uint64(_MASK32)
    return unpadded.astype(np.int64)


def combine_hashes(prefix: np.ndarray[Any, Any], suffix: np.ndarray[Any, Any],
                   suffix_lengths: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The unsigned 32-bit Java hash of ``prefix + suffix`` from the hashes of both parts."""
    joined: np.ndarray[Any, Any] = (prefix.astype(np.uint64) * _pow31(suffix_lengths)
                                    + suffix.astype(np.uint64)) & np.uint64(_MASK32)
    return joined.astype(np.int64)


def _pow31(lengths: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """31^n mod 2^32 for each n: from the table, or for a suffix longer than it (a key may be as long
    as the 32,767-byte properties allow) computed alone."""
    lengths = np.asarray(lengths, np.int64)
    if len(lengths) and int(lengths.max()) >= len(_POW31):
        return np.array([pow(31, n, 1 << 32) for n in lengths.tolist()], np.uint64)
    return _POW31[lengths]  # type: ignore[no-any-return]


def as_signed(unsigned: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Unsigned 32-bit values as Java ints."""
    return np.where(unsigned >= (1 << 31), unsigned - (1 << 32), unsigned)
