"""The ``mqstore`` Spark data source: a store directory as a table, a stream and a sink.

    spark.read.format("mqstore").load(store_dir)            # one row per commitlog record
    spark.readStream.format("mqstore").load(store_dir)      # follows the consume queues
    df.write.format("mqstore").option("broker", store_dir).mode("append").save()

The rows are ``mqstore.pipeline.schema``'s; the options are described in ``mqstore.pipeline.options.ReadOptions``
(reads), ``mqstore.pipeline.stream`` (streaming) and ``mqstore.pipeline.sink`` (writes). Reading never writes into
a store, live or not; writing goes through a running broker only.

A schema given to the read or the stream (``.schema("topic STRING, body BINARY")``: any of the
columns, in any order) makes the reader decode and yield only those columns
(``mqstore.pipeline.schema.Projection``): Spark prunes no column of a Python data source itself, and every
column it receives costs its JVM a conversion a row.

It works on any session: register it with ``spark.dataSource.register(MqstoreDataSource)``.
Filter pushdown (``spark.sql.python.filterPushdown.enabled``, off by default) lets the reader skip
files and read queues through their consume queues; without it the reader scans and Spark filters,
with the same rows. Spark refuses to plan a read whose reader implements ``pushFilters`` while
pushdown is off, and ``DataSource.reader`` is not told which it is, so ``reader`` looks at the
planning worker it runs in: Spark calls ``pushFilters`` only from its filter-pushdown worker
(``FILTER_PUSHDOWN_WORKER``), and only there does the reader implement it.

Spark 4.3.0 pitfall: filter pushdown stores the read it planned on the loaded relation, and a later
scan of the *same* loaded DataFrame with no pushable filter reuses it (reads too few rows); two
differently filtered branches of one DataFrame in one query (a union, a self-join) share the last
one planned. Call ``spark.read.format("mqstore").load(...)`` once per query or branch.
``tests/pipeline/test_datasource_read.py::test_spark_reuses_a_filtered_read_plan`` tracks it.
"""

from __future__ import annotations

import sys

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceWriter
from pyspark.sql.types import StructType

from mqstore.pipeline.options import ReadOptions
from mqstore.pipeline.reader import MqstorePushdownReader, MqstoreReader
from mqstore.pipeline.schema import DATA_SOURCE_NAME, SPARK_DDL, Projection
from mqstore.pipeline.sink import make_writer
from mqstore.pipeline.stream import MqstoreStreamReader

FILTER_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


def pushing_filters() -> bool:
    """Whether this process is the worker Spark plans a read in when filter pushdown is on and the
    query has filters. Spark's daemon imports the worker module; without the daemon
    (``spark.python.use.daemon=false``) it runs as ``python -m``, the module being ``__main__``."""
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return FILTER_PUSHDOWN_WORKER in sys.modules or getattr(main_spec, "name", None) == FILTER_PUSHDOWN_WORKER


class MqstoreDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return DATA_SOURCE_NAME

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        options, projection = ReadOptions.parse(self.options), Projection.of(schema)
        return MqstorePushdownReader(options, projection) if pushing_filters() else MqstoreReader(options, projection)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MqstoreStreamReader(self.options, Projection.of(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return make_writer(self.options, schema, overwrite)
