"""DispatchRequest: what a derived file needs to know about one commitlog record.

The commitlog is the truth and a DispatchRequest is a hint derived from it: a consume-queue or
index builder that misses some can always rebuild them by decoding the commitlog again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mqstore.engine.batch.key_text import BOUND, KeyText
from mqstore.engine.delay.table import DEFAULT_DELAY_LEVELS, DelayLevels, tags_code_of
from mqstore.engine.keyindex.keys import record_key_hashes
from mqstore.engine.log.record import SYSFLAG_TX_COMMIT, SYSFLAG_TX_MASK, Record

Array = np.ndarray[Any, Any]
Buffer = bytes | memoryview


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    phys_offset: int
    size: int
    tags_code: int
    store_ms: int
    queue_offset: int
    keys: tuple[str, ...]
    uniq_key: str | None
    sys_flag: int

    @classmethod
    def from_record(cls, record: Record, levels: DelayLevels = DEFAULT_DELAY_LEVELS) -> DispatchRequest:
        """The request of ``record``; ``levels`` is the store's delay table (a schedule-topic
        record's tags code is its delivery time)."""
        return cls(record.topic, record.queue_id, record.phys_offset, record.size,
                   tags_code_of(record.topic, record.properties, record.store_ms, levels),
                   record.store_ms, record.queue_offset, tuple(record.keys), record.uniq_key, record.sys_flag)

    @property
    def has_queue_entry(self) -> bool:
        """Prepared and rolled-back transaction records get no consume-queue entry."""
        return self.sys_flag & SYSFLAG_TX_MASK in (0, SYSFLAG_TX_COMMIT)


DISPATCH_COLUMNS = np.dtype([("phys_offset", "<i8"), ("size", "<i4"), ("topic", "<u2"), ("queue_id", "<i4"),
                             ("queue_offset", "<i8"), ("tags_code", "<i8"), ("store_ms", "<i8"), ("sys_flag", "<i4")])


class Dispatched(Protocol):
    """What a builder applies: ``DISPATCH_COLUMNS`` rows (one per record, in commitlog order), the
    topic table their ``topic`` column indexes, and the index keys of the records (``index_keys``)."""

    @property
    def rows(self) -> Array: ...

    @property
    def topics(self) -> list[str]: ...

    def index_keys(self) -> tuple[Array, Array]:
        """``key_rows`` (ascending; a record's UNIQ_KEY first, then its KEYS) and ``key_hashes``
        (``index_hash`` of ``topic#key``)."""
        ...


@dataclass(frozen=True, slots=True)
class DispatchBatch:
    """DispatchRequests as columns (``DISPATCH_COLUMNS``, one row per record in commitlog order), the
    topic table their ``topic`` column indexes, and each record's UNIQ_KEY and index keys as key text
    (``mqstore.engine.batch.key_text``): what one writer append, or one chunk of reput, tells the builders.
    ``keys`` is None in a batch read off the wire by a builder that never reads keys (the consume
    queues): its key text is neither checked nor joined, and asking for it is a ValueError."""

    columns: Array
    topics: list[str]
    keys: KeyText | None

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def rows(self) -> Array:
        return self.columns

    @classmethod
    def from_requests(cls, requests: list[DispatchRequest]) -> DispatchBatch:
        topics: dict[str, int] = {}
        columns = np.array([(r.phys_offset, r.size, topics.setdefault(r.topic, len(topics)), r.queue_id, r.queue_offset,
                             r.tags_code, r.store_ms, r.sys_flag) for r in requests], dtype=DISPATCH_COLUMNS)
        return cls(columns, list(topics), KeyText.of([r.uniq_key or "" for r in requests],
                                                     [" ".join(r.keys) for r in requests]))

    def wire(self) -> tuple[memoryview, bytes | memoryview, memoryview]:
        """The columns, key text and key bounds as buffers of bytes, without a copy (a frame each)."""
        keys = self.key_text()
        return (np.ascontiguousarray(self.columns).view(np.uint8).data, keys.text,
                np.ascontiguousarray(keys.bounds).view(np.uint8).data)

    @classmethod
    def from_wire(cls, count: int, key_bytes: int, topics: list[str], columns: Buffer, key_text: Buffer,
                  key_bounds: Buffer, *, keys: bool = True) -> DispatchBatch:
        """The batch of ``count`` records and ``key_bytes`` of key text that ``wire()`` gave, read in
        place (numpy views of the buffers); ValueError when a buffer's length is not what those counts
        say or the parts disagree, TypeError for a topic that is not a string. Without ``keys`` the
        key text is only measured, not checked, and the batch has none."""
        if (len(columns), len(key_text), len(key_bounds)) != (
                count * DISPATCH_COLUMNS.itemsize, key_bytes, (2 * count + 1) * BOUND.itemsize):
            raise ValueError(f"columns, key text and key bounds of {len(columns)}, {len(key_text)} and "
                             f"{len(key_bounds)} bytes are not those of {count} records and {key_bytes} bytes of keys")
        rows = np.frombuffer(columns, dtype=DISPATCH_COLUMNS)
        if count and _largest(rows["topic"]) >= len(topics):
            raise ValueError("dispatch columns and topics disagree")
        "".join(topics)  # TypeError for anything that is not a string
        return cls(rows, topics, KeyText.from_wire(key_text, key_bounds, count) if keys else None)

    def key_text(self) -> KeyText:
        """The records' key text; ValueError for a batch read without it."""
        if self.keys is None:
            raise ValueError("this dispatch batch was read without its key text")
        return self.keys

    @classmethod
    def concat(cls, batches: list[DispatchBatch]) -> DispatchBatch:
        """Consecutive batches as one (topic tables joined, the ``topic`` column renumbered, key texts
        joined when every batch has one); one batch is itself, not a copy."""
        if len(batches) == 1:
            return batches[0]
        topics = batches[0].topics
        # joined as bytes: numpy concatenates structured arrays field by field, at a cost per batch
        columns = np.concatenate([np.ascontiguousarray(b.columns).view(np.uint8) for b in batches]).view(
            DISPATCH_COLUMNS)
        if any(b.topics != topics for b in batches):
            table: dict[str, int] = {}
            columns["topic"] = np.concatenate([np.array([table.setdefault(t, len(table)) for t in b.topics],
                                                        np.int64)[b.columns["topic"]] for b in batches])
            topics = list(table)
        keys = [b.keys for b in batches if b.keys is not None]
        return cls(columns, topics, KeyText.join(keys) if len(keys) == len(batches) else None)

    def requests(self) -> Iterator[DispatchRequest]:
        for (phys, size, topic, queue_id, queue_offset, tags_code, store_ms, sys_flag), keys, uniq in zip(
                self.columns.tolist(), *self.key_text().strings(), strict=True):
            yield DispatchRequest(self.topics[topic], queue_id, phys, size, tags_code, store_ms, queue_offset,
                                  tuple(k for k in keys.split(" ") if k), uniq or None, sys_flag)

    def index_keys(self) -> tuple[Array, Array]:
        """Every record's UNIQ_KEY, then its KEYS split on single spaces (empty ones dropped), hashed
        as ``topic#key`` all at once from the key text (``mqstore.engine.keyindex.keys.record_key_hashes``)."""
        keys = self.key_text()
        return record_key_hashes(self.topics, self.columns["topic"], keys.text, keys.bounds)

    def topic_totals(self) -> list[tuple[str, int, int]]:
        """(topic, records, bytes) for each topic the batch holds: one sum for a batch of one topic
        (the common case), two counts otherwise."""
        if not len(self.columns):
            return []
        if len(self.topics) == 1:
            sizes = self.columns["size"]
            return [(self.topics[0], len(sizes), _total(sizes))]
        topic_ids = self.columns["topic"]
        counts = np.bincount(topic_ids, minlength=len(self.topics)).tolist()
        sizes = np.bincount(topic_ids, weights=self.columns["size"], minlength=len(self.topics)).tolist()
        return [(t, int(n), int(b)) for t, n, b in zip(self.topics, counts, sizes, strict=True) if n]

    def after(self, phys_offset: int) -> DispatchBatch:
        """The records at or after ``phys_offset``."""
        if not len(self.columns) or int(self.columns["phys_offset"][0]) >= phys_offset:
            return self  # the common case (a batch that follows the last), without numpy's searchsorted set-up
        first = int(np.searchsorted(self.columns["phys_offset"], phys_offset))
        return self if first == 0 else DispatchBatch(self.columns[first:], self.topics,
                                                          None if self.keys is None else self.keys.cut(first))


SMALL_COLUMN = 64  # up to this many values, a column's largest is found in Python: numpy's max costs more


def _largest(column: Array) -> int:
    """The largest value of a non-empty integer column: a round of one record pays no numpy reduction."""
    if len(column) <= SMALL_COLUMN:
        return max(column.tolist())  # type: ignore[no-any-return]
    return int(column.max())


def _total(column: Array) -> int:
    """The sum of a non-empty integer column: a round of one record pays no numpy reduction."""
    if len(column) <= SMALL_COLUMN:
        return sum(column.tolist())
    return int(column.sum())


class Dispatcher(Protocol):
    def dispatch(self, request: DispatchRequest) -> None: ...
