"""The batch reader: ``spark.read.format("mqstore").load(store_dir)``.

``MqstoreReader`` reads every record (of the ``topics`` option's topics) and leaves the query's
filters to Spark. ``MqstorePushdownReader`` is the same reader taking the filters it enforces itself
(and so consumes): ``topic`` = / IN, ``queue_id`` = / IN / ranges, ranges (and =) on ``queue_offset``,
``phys_offset`` and ``store_timestamp``. Anything else goes back to Spark. Which one a query gets is
``mqstore.pipeline.datasource``'s choice. Planning (``partitions``) runs on the driver and reads only
consume-queue entries and a few record heads; ``read`` runs in the tasks and maps the files itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from mqstore.engine.config import Geometry
from mqstore.engine.errors import MqstoreError
from mqstore.engine.read.store_files import read_geometry
from mqstore.pipeline.options import Pushdown, ReadOptions
from mqstore.pipeline.plan import plan_partitions
from mqstore.pipeline.scan import ReadContext, read_partition
from mqstore.pipeline.schema import FULL, Projection


class StoreNotFoundError(MqstoreError, FileNotFoundError):
    """The path given to the data source is not a store directory."""


def open_geometry(store_dir: str) -> Geometry:
    """The store's geometry (saved, or inferred from an Apache RocketMQ store's files)."""
    store = Path(store_dir)
    if not (store / "commitlog").is_dir():
        raise StoreNotFoundError(f"{store_dir} is not a message store: it has no commitlog directory")
    return read_geometry(store)


class MqstoreReader(DataSourceReader):
    """The store's records (``projection``'s columns of them); Spark applies the query's filters to them."""

    def __init__(self, options: ReadOptions, projection: Projection = FULL) -> None:
        self.options = options
        self.projection = projection
        self.geometry = open_geometry(options.store_dir)
        self.pushdown = Pushdown().with_topics(options.topics)

    def partitions(self) -> Sequence[InputPartition]:
        return plan_partitions(Path(self.options.store_dir), self.geometry, self.pushdown,
                               self.options.partition_bytes)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch] | Iterator[tuple[Any, ...]]:
        if type(partition) is InputPartition:  # Spark's stand-in when there is nothing to read
            return iter(())
        batches = read_partition(partition, self.context())
        return batches if self.options.arrow else as_tuples(batches)

    def context(self) -> ReadContext:
        o = self.options
        return ReadContext(o.store_dir, self.geometry, self.pushdown, o.include_body, o.verify_crc, o.batch_rows,
                           o.fail_on_data_loss, self.projection)


class MqstorePushdownReader(MqstoreReader):
    """The same reader, narrowed by the filters Spark pushes that it can enforce."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        rejected = []
        for f in filters:
            narrowed = self.pushdown.accept(f)
            if narrowed is None:
                rejected.append(f)
            else:
                self.pushdown = narrowed
        return iter(rejected)


def as_tuples(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
    """The same rows as tuples (``arrow=false``): maps as dicts, timestamps as aware datetimes."""
    for batch in batches:
        columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        for i, field in enumerate(batch.schema):
            if pa.types.is_map(field.type):
                columns[i] = [dict(pairs) if pairs is not None else None for pairs in columns[i]]
        yield from zip(*columns, strict=True)
