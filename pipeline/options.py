"""What a read asks for: the data source's options, and the filters it takes over from Spark.

``Pushdown`` holds every filter the reader consumed, as sets and inclusive integer bounds. The
planner uses it to choose which files, byte ranges and consume-queue slices to read; ``read`` then
applies it exactly to what it decoded, so a consumed filter is always fully enforced whatever the
pruning could prove.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

from mqstore.engine.errors import MqstoreError
from mqstore.pipeline.record_layout import RecordLayout
from mqstore.pipeline.schema import NEVER_NULL, TIMESTAMP_MAX_MS, table_column

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1
DEFAULT_PARTITION_BYTES = 64 * 1024 * 1024
DEFAULT_BATCH_ROWS = 32 * 1024
BATCH_BYTES = 64 * 1024 * 1024  # an Arrow binary column holds < 2 GiB; stay far below it
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Array = npt.NDArray[Any]


class OptionError(MqstoreError, ValueError):
    """An option of the mqstore data source has a value it cannot use."""


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, got {raw!r}")
    return value == "true"


def positive_option(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option {name} must be a positive integer, got {raw!r}")
    return value


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """Spark hands a case-insensitive dict; tests and jobs may hand a plain one."""
    return {str(k).lower(): v for k, v in options.items()}


def store_path(options: Mapping[str, str]) -> str:
    """``load(path)`` puts the store directory in ``path``; SQL tables can name it ``store``."""
    path = options.get("path") or options.get("store")
    if not path:
        raise OptionError("give the store directory: spark.read.format('mqstore').load(store_dir) "
                          "(or the option 'store')")
    return str(path)


def topic_list(options: Mapping[str, str]) -> frozenset[str] | None:
    raw = options.get("topics")
    if raw is None:
        return None
    topics = frozenset(t.strip() for t in str(raw).split(",") if t.strip())
    if not topics:
        raise OptionError(f"option topics must name at least one topic, got {raw!r}")
    return topics


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Options of batch and streaming reads (names are case-insensitive):

    ``topics``               comma-separated: only these topics
    ``includeBody``          default true; false leaves the body column null (bodies are not copied)
    ``verifyCrc``            default false; true checks every body and whole-record CRC and raises
                             ``CorruptRecordError`` on a record that fails, naming file and offset
    ``partitionBytes``       target commitlog bytes per partition (default 64 MiB)
    ``batchRows``            rows per Arrow batch (default 32768)
    ``failOnDataLoss``       default true; false skips consume-queue entries whose commitlog file was
                             deleted by retention instead of raising ``DataLossError``
    ``arrow``                default true: yield Arrow batches; false yields tuples (slower; for
                             comparison, and for Spark builds without Arrow support)
    """

    store_dir: str
    topics: frozenset[str] | None = None
    include_body: bool = True
    verify_crc: bool = False
    partition_bytes: int = DEFAULT_PARTITION_BYTES
    batch_rows: int = DEFAULT_BATCH_ROWS
    fail_on_data_loss: bool = True
    arrow: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        opts = lower_keys(options)
        return cls(store_path(opts), topic_list(opts), _flag(opts, "includeBody", True),
                   _flag(opts, "verifyCrc", False),
                   positive_option(opts, "partitionBytes", DEFAULT_PARTITION_BYTES) or DEFAULT_PARTITION_BYTES,
                   positive_option(opts, "batchRows", DEFAULT_BATCH_ROWS) or DEFAULT_BATCH_ROWS,
                   _flag(opts, "failOnDataLoss", True), _flag(opts, "arrow", True))


@dataclass(frozen=True, slots=True)
class Bounds:
    """An inclusive integer interval."""

    lo: int = LONG_MIN
    hi: int = LONG_MAX

    def meet(self, lo: int = LONG_MIN, hi: int = LONG_MAX) -> Bounds:
        return Bounds(max(self.lo, lo), min(self.hi, hi))

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    @property
    def unbounded(self) -> bool:
        return self.lo == LONG_MIN and self.hi == LONG_MAX

    def mask(self, values: Array) -> Array:
        return (values >= self.lo) & (values <= self.hi)


def _int_value(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _micros(value: Any) -> int | None:
    """A timestamp literal as UTC microseconds. Spark hands datetimes; a naive one is UTC (the
    session time zone this project sets)."""
    if not isinstance(value, datetime):
        return None
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_ACCEPTED = (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
_RANGE_COLUMNS = {"queue_id": _int_value, "queue_offset": _int_value, "phys_offset": _int_value,
                  "store_timestamp": _micros}


@dataclass(frozen=True, slots=True)
class Pushdown:
    """The consumed filters: ``topics``/``queue_ids`` sets (None: any) and inclusive bounds on
    queue id, queue offset, phys offset and store time (UTC microseconds)."""

    topics: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    bounds: dict[str, Bounds] = field(default_factory=dict)

    def bound(self, column: str) -> Bounds:
        return self.bounds.get(column, Bounds())

    def with_topics(self, topics: frozenset[str] | None) -> Pushdown:
        if topics is None:
            return self
        return replace(self, topics=topics if self.topics is None else self.topics & topics)

    def accept(self, f: Filter) -> Pushdown | None:
        """This pushdown narrowed by ``f``, or None when ``f`` is not one the reader enforces."""
        attribute: tuple[str, ...] = getattr(f, "attribute", ())  # every Filter subclass has one
        if len(attribute) != 1:
            return None
        column = table_column(attribute[0])  # a user's schema may name it in another case
        if isinstance(f, IsNotNull) and column in NEVER_NULL:
            return self  # true of every row the reader yields
        if isinstance(f, IsNotNull) and column == "store_timestamp":  # a bound: layout_mask drops the nulls
            return replace(self, bounds={**self.bounds, column: self.bound(column).meet(lo=LONG_MIN + 1)})
        if not isinstance(f, _ACCEPTED):
            return None
        if column == "topic":
            if isinstance(f, EqualTo) and isinstance(f.value, str):
                return self.with_topics(frozenset([f.value]))
            if isinstance(f, In) and all(isinstance(v, str) for v in f.value):
                return self.with_topics(frozenset(f.value))
            return None
        convert = _RANGE_COLUMNS.get(column)
        if convert is None:
            return None
        if column == "queue_id" and isinstance(f, In):
            ids = [_int_value(v) for v in f.value]
            if any(i is None for i in ids):
                return None
            wanted = frozenset(i for i in ids if i is not None)
            return replace(self, queue_ids=wanted if self.queue_ids is None else self.queue_ids & wanted)
        value = convert(f.value)
        if value is None:
            return None
        b = self.bound(column)
        if isinstance(f, EqualTo):
            b = b.meet(value, value)
        elif isinstance(f, GreaterThan):
            b = b.meet(lo=value + 1)
        elif isinstance(f, GreaterThanOrEqual):
            b = b.meet(lo=value)
        elif isinstance(f, LessThan):
            b = b.meet(hi=value - 1)
        elif isinstance(f, LessThanOrEqual):
            b = b.meet(hi=value)
        else:
            return None
        return replace(self, bounds={**self.bounds, column: b})

    @property
    def empty(self) -> bool:
        """Nothing can match."""
        return (self.topics is not None and not self.topics) or (self.queue_ids is not None and not self.queue_ids) \
            or any(b.empty for b in self.bounds.values())

    @property
    def selects_queues(self) -> bool:
        """Whether the filters name topics, queues or queue offsets: then consume queues say where
        the wanted records are."""
        return self.topics is not None or self.queue_ids is not None or \
            not self.bound("queue_id").unbounded or not self.bound("queue_offset").unbounded

    def wants_queue(self, topic: str, queue_id: int) -> bool:
        b = self.bound("queue_id")
        return (self.topics is None or topic in self.topics) and \
            (self.queue_ids is None or queue_id in self.queue_ids) and b.lo <= queue_id <= b.hi

    def layout_mask(self, buf: Array, layout: RecordLayout) -> Array | None:
        """Which of ``layout``'s records (all valid) pass the filters (None: all of them)."""
        columns = {"queue_id": layout.queue_id, "queue_offset": layout.queue_offset,
                   "phys_offset": layout.phys_offset}
        mask: Array | None = None
        for column, b in self.bounds.items():
            if b.unbounded:
                continue
            if column == "store_timestamp":  # a null timestamp (a damaged record's) meets no bound
                stamped = np.abs(layout.store_ms) <= TIMESTAMP_MAX_MS
                m = b.mask(np.where(stamped, layout.store_ms, 0) * 1000) & stamped
            else:
                m = b.mask(columns[column])
            mask = m if mask is None else mask & m
        if self.queue_ids is not None:
            m = np.isin(layout.queue_id, np.fromiter(self.queue_ids, dtype=np.int64))
            mask = m if mask is None else mask & m
        if self.topics is not None:  # topics are valid UTF-8 (the scan checks): bytes equal when text does
            m = np.zeros(len(layout), dtype=bool)
            for topic in self.topics:
                m |= layout.topic_is(buf, topic)
            mask = m if mask is None else mask & m
        return mask
