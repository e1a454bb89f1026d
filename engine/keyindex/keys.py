"""The keys an IndexFile holds: which keys a record has, the ``topic#key`` string, and its hash.

A record is indexed under its UNIQ_KEY first, then under each non-empty token of its KEYS property
(``IndexService.buildIndex``), each as ``topic#key`` (``IndexService.buildKey``). The index stores
only ``index_hash(topic#key)``: Java's ``String.hashCode`` (``mqstore.engine.java.jhash``) made non-negative,
``abs(hashCode)`` with Integer.MIN_VALUE (whose abs overflows) read as 0.

Every path hashes keys here: the record path a key or a record at a time (``index_hash``,
``key_hashes``), and a ``DispatchBatch``'s many records at once from their key text
(``record_key_hashes``: one kernel call, no string per key). Re-dispatch hashes the keys it reads off records' bytes
in its own kernel, with the same rules (``mqstore.engine.batch.dispatch_columns``).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from mqstore.engine import _native
from mqstore.engine.java.jhash import java_hash, java_hashes

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


def index_hashes(full_keys: Sequence[str]) -> list[int]:
    """``index_hash`` of many ``topic#key`` strings at once."""
    return [_non_negative(h) for h in java_hashes(full_keys)]


def key_hashes(topic: str, keys: Sequence[str]) -> Array:
    """``index_hash`` of ``topic#key`` for each of ``keys``, in order, as int64."""
    return np.asarray(index_hashes([index_key(topic, key) for key in keys]), np.int64)


def java_key_hashes(topic: str, keys: Sequence[str]) -> array[int]:
    """Java's hash of ``topic#key`` for each of ``keys``, in order, as int64s, in one kernel call
    (``mqstore.engine._native.java_hashes``): what a key query's probe takes, reading each as its ``index_hash``
    (``mqstore.engine._native.index_probe``)."""
    prefix = f"{topic}{KEY_JOINER}"
    hashes = array("q", bytes(8 * len(keys)))
    _native.java_hashes([prefix + key for key in keys], hashes)
    return hashes


def record_key_hashes(topics: list[str], topic_codes: Array, text: bytes | memoryview,
                      bounds: Array) -> tuple[Array, Array]:
    """The index keys of many records, each given by its topic (an index into ``topics``) and its
    UNIQ_KEY and KEYS (space separated) as key text (``mqstore.engine.batch.key_text``: UTF-8 ``text`` and
    its 2n + 1 int32 ``bounds``): ``key_rows`` (each key's record, ascending; a record's keys in
    ``record_keys`` order) and ``key_hashes``. One kernel call over the text as it came
    (``mqstore.engine._native.index_key_hashes``), Java's UTF-16 units of the decoded text whatever it holds."""
    n = len(topic_codes)
    capacity = n + (len(text) + n) // 2  # a UNIQ_KEY, and at most one KEYS token per two bytes
    key_rows = np.empty(capacity, np.int64)
    hashes = np.empty(capacity, np.int64)
    count = _native.index_key_hashes(topics, np.ascontiguousarray(topic_codes, np.int64), text, bounds, key_rows,
                                     hashes)
    return key_rows[:count], hashes[:count]
