"""The streaming reader: ``spark.readStream.format("mqstore").load(store_dir)`` follows consume queues.

Offsets are per queue, like Spark's Kafka source: ``{"topic": {"queueId": next_queue_offset}}``
(queue ids as string keys). A queue's end is read off its files each time (the first entry that is
not complete and valid ends it), so a torn in-progress entry is never read, and queues or topics
created later show up at the next trigger, starting from their first entry.

Options besides the batch reader's ``topics``/``includeBody``/``verifyCrc``/``batchRows``:
``startingOffsets`` = ``earliest`` (default) | ``latest`` | that JSON shape (-2: earliest, -1:
latest; queues it does not name start at their earliest), and ``maxOffsetsPerTrigger``: rows per
micro-batch in all, spread over the queues in proportion to how far behind each is.

Exactly-once across restarts comes from Spark's checkpoint, which stores these offsets; ``commit``
has nothing to do (Spark calls it late, never for a run's last batch).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from mqstore.engine.config import Geometry
from mqstore.pipeline.options import OptionError, Pushdown, ReadOptions, lower_keys, positive_option
from mqstore.pipeline.plan import QueueSlicePartition
from mqstore.pipeline.queues import QueueSpan, commitlog_min_offset, queue_spans
from mqstore.pipeline.reader import open_geometry
from mqstore.pipeline.scan import ReadContext, read_slice
from mqstore.pipeline.schema import FULL, Projection

EARLIEST, LATEST = -2, -1  # Kafka's markers inside a JSON startingOffsets
MAX_ENTRIES_PER_PARTITION = 1 << 20

Offsets = dict[str, dict[str, int]]
QueueKey = tuple[str, int]


def parse_starting(raw: str) -> str | Offsets:
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        value = json.loads(text)
        offsets = {str(topic): {str(int(q)): int(o) for q, o in queues.items()} for topic, queues in value.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f"startingOffsets must be earliest, latest or JSON like "
                          f'{{"topic": {{"0": 42}}}}, got {raw!r}') from None
    return offsets


def to_offsets(values: Mapping[QueueKey, int]) -> Offsets:
    """The JSON shape, with topics and queue ids in order: Spark compares offsets as JSON text."""
    out: Offsets = {}
    for (topic, queue_id), offset in sorted(values.items()):
        out.setdefault(topic, {})[str(queue_id)] = int(offset)
    return out


def from_offsets(offsets: Mapping[str, Mapping[str, Any]]) -> dict[QueueKey, int]:
    return {(topic, int(q)): int(o) for topic, queues in offsets.items() for q, o in queues.items()}


def spread(lags: Mapping[QueueKey, int], budget: int) -> dict[QueueKey, int]:
    """At most ``budget`` rows over the queues, in proportion to each one's lag (largest remainders
    first), never more than a queue has."""
    total = sum(lags.values())
    if total <= budget:
        return dict(lags)
    take = {k: budget * lag // total for k, lag in lags.items()}
    left = budget - sum(take.values())
    for k in sorted(lags, key=lambda k: (-(budget * lags[k] % total), k)):
        if left <= 0:
            break
        if take[k] < lags[k]:
            take[k] += 1
            left -= 1
    return take


class MqstoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str], projection: Projection = FULL) -> None:
        opts = lower_keys(options)
        self.options = ReadOptions.parse(opts)
        self.projection = projection
        self.starting = parse_starting(str(opts.get("startingoffsets", "earliest")))
        self.max_rows = positive_option(opts, "maxOffsetsPerTrigger", None)
        self.geometry: Geometry = open_geometry(self.options.store_dir)
        self.target: dict[QueueKey, int] | None = None  # availableNow: the ends when the run began

    # -- what the store holds ---------------------------------------------------------------------

    def _spans(self) -> dict[QueueKey, QueueSpan]:
        store = Path(self.options.store_dir)
        log_min = commitlog_min_offset(store, self.geometry.commitlog_file_size)
        return {(s.topic, s.queue_id): s for s in queue_spans(store, self.geometry.cq_entries_per_file, log_min,
                                                                self.options.topics)}

    def _ends(self) -> dict[QueueKey, int]:
        return {k: s.end_offset for k, s in self._spans().items()}

    # -- Spark's calls ----------------------------------------------------------------------------

    def initialOffset(self) -> Offsets:
        spans = self._spans()
        if self.starting == "earliest":
            return to_offsets({k: s.min_offset for k, s in spans.items()})
        if self.starting == "latest":
            return to_offsets({k: s.end_offset for k, s in spans.items()})
        given = from_offsets(self.starting)  # type: ignore[arg-type]
        values = {k: s.min_offset for k, s in spans.items()}
        for k, offset in given.items():
            if self.options.topics is not None and k[0] not in self.options.topics:
                continue
            span = spans.get(k)
            if offset == EARLIEST:
                values[k] = span.min_offset if span else 0
            elif offset == LATEST:
                values[k] = span.end_offset if span else 0
            else:
                values[k] = offset
        return to_offsets(values)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._ends()

    def reportLatestOffset(self) -> Offsets:
        return to_offsets(self._ends())

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        begin = from_offsets(start)
        spans = self._spans()
        ends = {k: s.end_offset for k, s in spans.items()}
        if self.target is not None:  # never past what was there when availableNow began
            ends = {k: min(end, self.target[k]) for k, end in ends.items() if k in self.target}
        lags: dict[QueueKey, int] = {}
        for k, end in ends.items():
            first = begin.get(k, spans[k].min_offset)  # a queue new since the last batch: from its start
            if end > first:
                lags[k] = end - first
        if isinstance(limit, ReadMaxRows):
            lags = spread(lags, limit.max_rows)
        values = dict(begin)
        for k, count in lags.items():
            if count > 0:
                values[k] = begin.get(k, spans[k].min_offset) + count
        out = to_offsets(values)
        return start if out == start else out

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin, stop = from_offsets(start), from_offsets(end)
        spans = self._spans() if any(k not in begin for k in stop) else {}
        parts: list[InputPartition] = []
        for k, to_offset in sorted(stop.items()):
            from_offset = begin[k] if k in begin else (spans[k].min_offset if k in spans else 0)
            for lo in range(from_offset, to_offset, MAX_ENTRIES_PER_PARTITION):
                parts.append(QueueSlicePartition(k[0], k[1], lo, min(lo + MAX_ENTRIES_PER_PARTITION, to_offset)))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueSlicePartition):
            return iter(())
        o = self.options
        return read_slice(partition, ReadContext(o.store_dir, self.geometry, Pushdown(), o.include_body,
                                                 o.verify_crc, o.batch_rows, o.fail_on_data_loss, self.projection))

    def commit(self, end: Offsets) -> None:
        """Nothing to release: the offsets Spark checkpoints are the whole state."""
