"""The table a store directory becomes: one row per commitlog record, every field RocketMQ keeps.

Shared by the data source (which yields Arrow batches of exactly these columns, in this order) and
the jobs built on it. Timestamps are UTC microseconds, as Spark wants them.

A read may ask for fewer: ``Projection.of`` turns the schema a user gives
(``spark.read.format("mqstore").schema("topic STRING, body BINARY")``) into the columns to decode, in
the user's order and under the user's names; a column the table does not have, or one of another
type, is a ``ProjectionError``. A Python data source gets no column pruning from Spark (4.3.0), so
this is the way to read only some columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StructType

from mqstore.engine.errors import MqstoreError

DATA_SOURCE_NAME = "mqstore"

# (name, Spark DDL type, Arrow type)
COLUMNS: tuple[tuple[str, str, pa.DataType], ...] = (
    ("topic", "STRING", pa.string()),
    ("queue_id", "INT", pa.int32()),
    ("queue_offset", "BIGINT", pa.int64()),
    ("phys_offset", "BIGINT", pa.int64()),
    ("size", "INT", pa.int32()),
    ("flag", "INT", pa.int32()),
    ("sys_flag", "INT", pa.int32()),
    ("body_crc", "INT", pa.int32()),
    ("tags", "STRING", pa.string()),
    ("keys", "ARRAY<STRING>", pa.list_(pa.string())),
    ("properties", "MAP<STRING, STRING>", pa.map_(pa.string(), pa.string())),
    ("body", "BINARY", pa.binary()),
    ("born_timestamp", "TIMESTAMP", pa.timestamp("us", tz="UTC")),
    ("born_host", "STRING", pa.string()),
    ("store_timestamp", "TIMESTAMP", pa.timestamp("us", tz="UTC")),
    ("store_host", "STRING", pa.string()),
    ("reconsume_times", "INT", pa.int32()),
    ("prepared_tx_offset", "BIGINT", pa.int64()),
    ("msg_id", "STRING", pa.string()),
    ("uniq_key", "STRING", pa.string()),
)

SPARK_DDL = ", ".join(f"{name} {ddl}" for name, ddl, _ in COLUMNS)
ARROW_SCHEMA = pa.schema([pa.field(name, arrow_type) for name, _, arrow_type in COLUMNS])
COLUMN_NAMES = tuple(name for name, _, _ in COLUMNS)
# the largest milliseconds a timestamp column holds (as microseconds, int64): a record saying more is
# damaged, and its timestamp is null
TIMESTAMP_MAX_MS = (1 << 63) // 1000 - 1
# columns every row has a value in (tags, body, uniq_key may be null, and a timestamp whose milliseconds
# cannot be one: mqstore.pipeline.columns writes null there)
NEVER_NULL = frozenset({"topic", "queue_id", "queue_offset", "phys_offset", "size", "flag", "sys_flag", "body_crc",
                        "keys", "properties", "born_host", "store_host", "reconsume_times", "prepared_tx_offset",
                        "msg_id"})


def table_column(name: str) -> str:
    """The table's column a name in a user's schema (or a filter on it) means: names match without
    regard to case, as Spark's do by default."""
    return name.lower()


class ProjectionError(MqstoreError, ValueError):
    """A schema given to the data source asks for a column the table does not have, or as another type."""


@dataclass(frozen=True, slots=True)
class Projection:
    """The columns a read yields: the table's ``columns`` (names as in ``COLUMNS``), in output order,
    and the Arrow schema of the batches (the user's names, the table's types)."""

    columns: tuple[str, ...]
    arrow_schema: pa.Schema

    @classmethod
    def of(cls, schema: StructType) -> Projection:
        """The projection a Spark schema asks for: any non-empty subset of the table's columns, in any
        order, names matched without regard to case (Spark's default), each of the table's type, NOT NULL
        only where every row has a value."""
        if not schema.fields:
            raise ProjectionError(f"the schema names no column; {DATA_SOURCE_NAME} has: {SPARK_DDL}")
        types = {name: arrow_type for name, _, arrow_type in COLUMNS}
        columns: list[str] = []
        fields: list[pa.Field] = []
        for field in schema.fields:
            name = table_column(field.name)
            if name not in types:
                raise ProjectionError(f"{DATA_SOURCE_NAME} has no column {field.name!r}; its columns: {SPARK_DDL}")
            if name in columns:
                raise ProjectionError(f"the schema names column {name!r} twice")
            expected = from_arrow_type(types[name])
            if field.dataType != expected:
                raise ProjectionError(f"column {field.name!r} is {expected.simpleString()} in {DATA_SOURCE_NAME}, "
                                  f"not {field.dataType.simpleString()}")
            if not field.nullable and name not in NEVER_NULL:
                raise ProjectionError(
                    f"column {field.name!r} can be null (not every record has one): drop its NOT NULL")
            columns.append(name)
            fields.append(pa.field(field.name, types[name], nullable=field.nullable))
        return cls(tuple(columns), pa.schema(fields))


FULL = Projection(COLUMN_NAMES, ARROW_SCHEMA)
