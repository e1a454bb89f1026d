"""The table a store directory becomes: one row per commitlog record, every field RocketMQ keeps.

Shared by the data source (which yields Arrow batches of exactly these columns, in this order) and
the jobs built on it. Timestamps are UTC microseconds, as Spark wants them.
"""

from __future__ import annotations

import pyarrow as pa

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
