"""The keys an IndexFile holds: which keys a record has, the ``topic#key`` string, and its hash.

A record is indexed under its UNIQ_KEY first, then under each non-empty token of its KEYS property
(``IndexService.buildIndex``), each as ``topic#key`` (``IndexService.buildKey``). The index stores
only ``index_hash(topic#key)``: Java's ``String.hashCode`` (``engine.jhash``) made non-negative,
``abs(hashCode)`` with Integer.MIN_VALUE (whose abs overflows) read as 0.

Every path hashes keys here: the record path a key or a record at a time (``index_hash``,
``key_hashes``), and the columnar paths many records at once, either from per-record key strings
(``record_key_hashes``, what a ``DispatchBatch`` carries: one kernel call) or from the Java hashes
of topics and keys already computed over the records' bytes (``joined_hashes``: the Java hash of
``topic#key`` joined from the hashes of its parts with ``combine_hashes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from engine import _native
from engine.jhash import combine_hashes, java_hash, java_hashes

KEY_JOINER = "#"
_INT_MIN = -(1 << 31)

Array = np.ndarray[Any, Any]


def index_key(topic: str, key: str) -> str:
    """The string an IndexFile hashes: ``topic#key`` (``IndexService.buildKey``)."""
    return f"{topic}{KEY_JOINER}{key}"


def record_keys(uniq_key: str | None, keys: Iterable[str]) -> list[str]:
    """What a record is indexed under, in order: its UNIQ_KEY, then each non-empty KEYS token."""
    return ([uniq_key] if uniq_key else []) + [key for key in keys if key]


def index_hash(full_key: str) -> int:
    """IndexFile key hash of ``topic#key``: ``abs(hashCode)``, Integer.MIN_VALUE mapped to 0."""
    return _non_negative(java_hash(full_key))


def _non_negative(h: int) -> int:
    return 0 if h == _INT_MIN else abs(h)


def as_index_hashes(unsigned: Array) -> Array:
    """``index_hash`` from unsigned 32-bit Java hashes, as int64."""
    signed = np.where(unsigned >= (1 << 31), unsigned - (1 << 32), unsigned)
    return np.where(signed == _INT_MIN, 0, np.abs(signed)).astype(np.int64)


def index_hashes(full_keys: Sequence[str]) -> list[int]:
    """``index_hash`` of many ``topic#key`` strings at once."""
    return [_non_negative(h) for h in java_hashes(full_keys)]


def key_hashes(topic: str, keys: Sequence[str]) -> Array:
    """``index_hash`` of ``topic#key`` for each of ``keys``, in order, as int64."""
    return np.asarray(index_hashes([index_key(topic, key) for key in keys]), np.int64)


def joined_hashes(topic_hashes: Array, key_hashes: Array, key_lengths: Array) -> Array:
    """``index_hash`` of ``topic#key`` for each key, given the unsigned Java hashes of its topic and of
    the key itself, and the key's length in UTF-16 units: the hash of ``topic#`` joined to the key's."""
    prefix = combine_hashes(topic_hashes, np.full(len(topic_hashes), ord(KEY_JOINER), np.int64),
                            np.ones(len(topic_hashes), np.int64))
    return as_index_hashes(combine_hashes(prefix, key_hashes, key_lengths))


def record_key_hashes(topics: list[str], topic_codes: Array, keys: list[str],
                      uniq_keys: list[str]) -> tuple[Array, Array]:
    """The index keys of many records, each given by its topic (an index into ``topics``), its KEYS
    (space separated) and its UNIQ_KEY ("" for none): ``key_rows`` (each key's record, ascending; a
    record's keys in ``record_keys`` order) and ``key_hashes``. One kernel call over the strings as
    they are (``engine._native.index_key_hashes``), Java's UTF-16 units whatever the text."""
    n = len(keys)
    capacity = n + (sum(map(len, keys)) + n) // 2  # a UNIQ_KEY, and at most one KEYS token per two characters
    key_rows = np.empty(capacity, np.int64)
    hashes = np.empty(capacity, np.int64)
    count = _native.index_key_hashes(topics, np.ascontiguousarray(topic_codes, np.int64), keys, uniq_keys, key_rows,
                                     hashes)
    return key_rows[:count], hashes[:count]
