"""The Java string hash as engine/java/jhash.py computed it before the kernels (``mqstore.engine._native.java_hash``,
``java_hashes``, ``dispatch_keys``): one string at a time in Python, and many ASCII strings at once
with numpy, as slices of one text or as the rows of a matrix, joined from the hashes of their parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

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
