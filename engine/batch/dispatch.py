"""DispatchRequest: what a derived file needs to know about one commitlog record.

The commitlog is the truth and a DispatchRequest is a hint derived from it: a consume-queue or
index builder that misses some can always rebuild them by decoding the commitlog again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from engine.batch.key_text import KeyText
from engine.keyindex.keys import record_key_hashes
from engine.log.delay_table import DEFAULT_DELAY_LEVELS, DelayLevels, tags_code_of
from engine.log.record import SYSFLAG_TX_COMMIT, SYSFLAG_TX_MASK, Record

Array = np.ndarray[Any, Any]


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
    (``engine.batch.key_text``): what one writer append, or one chunk of reput, tells the builders."""

    columns: Array
    topics: list[str]
    keys: KeyText

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

    @classmethod
    def from_wire(cls, columns: bytes, topics: list[str], key_text: bytes, key_bounds: bytes) -> DispatchBatch:
        """The batch ``columns.tobytes()``, its topics and ``KeyText.wire()`` made; ValueError when they
        disagree, TypeError for a topic that is not a string."""
        rows = np.frombuffer(columns, dtype=DISPATCH_COLUMNS)
        if len(rows) and int(rows["topic"].max()) >= len(topics):
            raise ValueError("dispatch columns and topics disagree")
        "".join(topics)  # TypeError for anything that is not a string
        return cls(rows, topics, KeyText.from_wire(key_text, key_bounds, len(rows)))

    @classmethod
    def concat(cls, batches: list[DispatchBatch]) -> DispatchBatch:
        """Consecutive batches as one (topic tables joined, the ``topic`` column renumbered)."""
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
        return cls(columns, topics, KeyText.join([b.keys for b in batches]))

    def requests(self) -> Iterator[DispatchRequest]:
        for (phys, size, topic, queue_id, queue_offset, tags_code, store_ms, sys_flag), keys, uniq in zip(
                self.columns.tolist(), *self.keys.strings(), strict=True):
            yield DispatchRequest(self.topics[topic], queue_id, phys, size, tags_code, store_ms, queue_offset,
                                  tuple(k for k in keys.split(" ") if k), uniq or None, sys_flag)

    def index_keys(self) -> tuple[Array, Array]:
        """Every record's UNIQ_KEY, then its KEYS split on single spaces (empty ones dropped), hashed
        as ``topic#key`` all at once from the key text (``engine.keyindex.keys.record_key_hashes``)."""
        return record_key_hashes(self.topics, self.columns["topic"], self.keys.text, self.keys.bounds)

    def topic_totals(self) -> list[tuple[str, int, int]]:
        """(topic, records, bytes) for each topic the batch holds: one sum for a batch of one topic
        (the common case), two counts otherwise."""
        if not len(self.columns):
            return []
        if len(self.topics) == 1:
            return [(self.topics[0], len(self.columns), int(self.columns["size"].sum()))]
        topic_ids = self.columns["topic"]
        counts = np.bincount(topic_ids, minlength=len(self.topics)).tolist()
        sizes = np.bincount(topic_ids, weights=self.columns["size"], minlength=len(self.topics)).tolist()
        return [(t, int(n), int(b)) for t, n, b in zip(self.topics, counts, sizes, strict=True) if n]

    def after(self, phys_offset: int) -> DispatchBatch:
        """The records at or after ``phys_offset``."""
        if not len(self.columns) or int(self.columns["phys_offset"][0]) >= phys_offset:
            return self  # the common case (a batch that follows the last), without numpy's searchsorted set-up
        first = int(np.searchsorted(self.columns["phys_offset"], phys_offset))
        return self if first == 0 else DispatchBatch(self.columns[first:], self.topics, self.keys.cut(first))


class Dispatcher(Protocol):
    def dispatch(self, request: DispatchRequest) -> None: ...
