"""The keys an IndexFile holds: which keys a record has, the ``topic#key`` string, and its hash.

A record is indexed under its UNIQ_KEY first, then under each non-empty token of its KEYS property
(``IndexService.buildIndex``), each as ``topic#key`` (``IndexService.buildKey``). The index stores
only ``index_hash(topic#key)``: Java's ``String.hashCode`` (``engine.jhash``) made non-negative,
``abs(hashCode)`` with Integer.MIN_VALUE (whose abs overflows) read as 0.

Every path hashes keys here: the record path a key or a record at a time (``index_hash``,
``key_hashes``), and the columnar paths many records at once, either from per-record key strings
(``record_key_hashes``, what a ``DispatchBatch`` carries) or from the Java hashes of topics and keys
already computed over the records' bytes (``joined_hashes``). The columnar forms stay numpy
throughout: the Java hash of ``topic#key`` is joined from the hashes of its parts
(``combine_hashes``), so no key is hashed by a Python loop unless its text is not ASCII.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from engine.jhash import combine_hashes, java_hash, java_hashes, java_hashes_of_slices

KEY_JOINER = "#"
_INT_MIN = -(1 << 31)
_MASK32 = 0xFFFFFFFF

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


def _topic_hashes(topics: Sequence[str]) -> Array:
    """The unsigned 32-bit Java hash of each topic (a batch's topic table), for ``joined_hashes``."""
    return np.asarray(java_hashes(topics), np.int64) & _MASK32


def joined_hashes(topic_hashes: Array, key_hashes: Array, key_lengths: Array) -> Array:
    """``index_hash`` of ``topic#key`` for each key, given the unsigned Java hashes of its topic and of
    the key itself, and the key's length in UTF-16 units: the hash of ``topic#`` joined to the key's."""
    prefix = combine_hashes(topic_hashes, np.full(len(topic_hashes), ord(KEY_JOINER), np.int64),
                            np.ones(len(topic_hashes), np.int64))
    return as_index_hashes(combine_hashes(prefix, key_hashes, key_lengths))


def record_key_hashes(topics: Sequence[str], topic_codes: Array, keys: Sequence[str],
                      uniq_keys: Sequence[str]) -> tuple[Array, Array]:
    """The index keys of many records, each given by its topic (an index into ``topics``), its KEYS
    (space separated) and its UNIQ_KEY ("" for none): ``key_rows`` (each key's record, ascending; a
    record's keys in ``record_keys`` order) and ``key_hashes``.

    All at once: the strings are joined into one text, cut at the spaces that separate keys (a
    UNIQ_KEY is one key, spaces and all), and each slice's Java hash is joined to its topic's. Text
    that is not ASCII goes key by key, because Java hashes UTF-16 units."""
    n = len(keys)
    items: list[str] = [""] * (2 * n)
    items[0::2] = uniq_keys
    items[1::2] = keys
    text = " ".join(items)
    if not text.isascii():
        return _record_key_hashes_exactly(topics, topic_codes, keys, uniq_keys)
    data = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    spaces = np.flatnonzero(data == ord(" "))
    if len(spaces) == len(items) - 1:  # no key holds a space: the spaces are the separators
        starts = np.concatenate(([0], spaces + 1))
        ends = np.concatenate((spaces, [len(data)]))
        item_of = np.arange(len(items))
    else:
        lengths = np.fromiter(map(len, items), np.int64, len(items))
        item_ends = np.cumsum(lengths + 1) - 1  # the separator (or the text's end) after each item
        item_of_space = np.searchsorted(item_ends, spaces)
        # a space cuts between items, and inside KEYS; a UNIQ_KEY is one key, spaces and all
        cuts = spaces[(item_ends[item_of_space] == spaces) | (item_of_space % 2 == 1)]
        starts = np.concatenate(([0], cuts + 1))
        ends = np.concatenate((cuts, [len(data)]))
        item_of = np.searchsorted(item_ends, starts)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    key_rows = (item_of[keep] // 2).astype(np.int64)
    hashes = joined_hashes(_topic_hashes(topics)[np.asarray(topic_codes)[key_rows]],
                           java_hashes_of_slices(data, starts, ends), ends - starts)
    return key_rows, hashes


def _record_key_hashes_exactly(topics: Sequence[str], topic_codes: Array, keys: Sequence[str],
                               uniq_keys: Sequence[str]) -> tuple[Array, Array]:
    key_rows: list[int] = []
    full_keys: list[str] = []
    for row, (topic, keys_text, uniq) in enumerate(zip(np.asarray(topic_codes).tolist(), keys, uniq_keys,
                                                       strict=True)):
        names = record_keys(uniq, keys_text.split(" "))
        full_keys.extend(index_key(topics[topic], name) for name in names)
        key_rows.extend([row] * len(names))
    return np.asarray(key_rows, np.int64), np.asarray(index_hashes(full_keys), np.int64)
