"""The Java string hash as engine/jhash.py computed it before the kernel (``engine._native.java_hashes``):
one string at a time in Python, and many ASCII strings at once with numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.jhash import MAX_ROW_WIDTH, java_hashes_of_rows

_MASK32 = 0xFFFFFFFF
_FEW_STRINGS = 16  # fewer hash faster one by one than through numpy's setup


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


def java_hashes(strings: Sequence[str]) -> list[int]:
    """``java_hash`` of many strings at once (``java_hashes_of_slices`` over the joined text)."""
    if len(strings) < _FEW_STRINGS or not all(s.isascii() for s in strings):
        return [java_hash(s) for s in strings]
    data = np.frombuffer("".join(strings).encode("ascii"), dtype=np.uint8)
    lengths = np.fromiter(map(len, strings), np.int64, len(strings))
    ends = np.cumsum(lengths)
    signed = java_hashes_of_slices(data, ends - lengths, ends)
    signed[signed >= (1 << 31)] -= 1 << 32
    return signed.tolist()  # type: ignore[no-any-return]


def java_hashes_of_slices(data: np.ndarray[Any, Any], starts: np.ndarray[Any, Any],
                          ends: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``java_hash`` of the ASCII byte strings ``data[starts[i]:ends[i]]`` (slices in ascending order,
    not overlapping), as unsigned 32-bit values in int64.

    Slices of similar lengths go as the zero-padded rows of a matrix (``java_hashes_of_rows``); a few
    long ones among short ones as h = sum(unit_i * 31^(n-1-i)) mod 2^32 over their bytes alone, with
    numpy's wrapping uint64 products (2^32 divides 2^64, so the low 32 bits come out exact)."""
    count = len(starts)
    lengths = np.asarray(ends, np.int64) - starts
    total = int(lengths.sum())
    if not total:
        return np.zeros(count, np.int64)
    width = int(lengths.max())
    if width <= MAX_ROW_WIDTH and count * width <= 4 * total + 4096:
        columns = np.arange(width)
        rows = np.concatenate((data, np.zeros(width, np.uint8)))[np.asarray(starts, np.int64)[:, None] + columns]
        rows[columns >= lengths[:, None]] = 0
        return java_hashes_of_rows(rows, lengths)
    powers = np.full(width, 31, np.uint64)
    powers[0] = 1
    powers = np.cumprod(powers)  # 31^0, 31^1, ... mod 2^64
    firsts = np.cumsum(lengths) - lengths  # where each slice's bytes begin among all slices' bytes
    within = np.arange(total) - np.repeat(firsts, lengths)
    pos = np.repeat(np.asarray(starts, np.int64), lengths) + within
    terms = data[pos].astype(np.uint64) * powers[np.repeat(lengths, lengths) - 1 - within]
    h = np.zeros(count, np.uint64)
    filled = lengths > 0
    h[filled] = np.add.reduceat(terms, firsts[filled]) & np.uint64(_MASK32)
    return h.astype(np.int64)
