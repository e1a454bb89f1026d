"""``export``: a store's table (``mqstore.pipeline.schema``) written as Parquet or JSON, partitioned by topic
and UTC date, through the ``mqstore`` data source. A topic list goes to the source as its
``topics`` option, so the other topics' files are not even read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMATS = ("parquet", "json")
MODES = ("error", "overwrite", "append")
PARTITION_COLUMNS = ("topic", "date")


@dataclass(frozen=True, slots=True)
class ExportResult:
    out: Path
    fmt: str
    partitions: list[str]  # topic=.../date=... directories under ``out``


def read_store(spark: Any, store_dir: Path | str, *, topics: Sequence[str] | None = None,
               include_body: bool = True) -> Any:
    """The store as a DataFrame; ``topics`` is pushed to the source."""
    from mqstore.pipeline.schema import DATA_SOURCE_NAME  # here: the CLI imports this module without pyarrow

    store_dir = Path(store_dir)
    if not (store_dir / "commitlog").is_dir():
        raise FileNotFoundError(f"no store at {store_dir} (it has no commitlog directory)")
    reader = spark.read.format(DATA_SOURCE_NAME).option("includeBody", str(include_body).lower())
    if topics:
        reader = reader.option("topics", ",".join(topics))
    return reader.load(str(store_dir))


def export(spark: Any, store_dir: Path | str, out: Path | str, *, fmt: str = "parquet",
           topics: Sequence[str] | None = None, mode: str = "error") -> ExportResult:
    """Write every record of the store (or of ``topics``) under ``out``. ``mode`` is Spark's save
    mode: by default an existing ``out`` is an error."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    from pyspark.sql import functions as F

    # the session runs in UTC (mqstore.pipeline.session), so the date is the UTC date of the store time
    table = read_store(spark, store_dir, topics=topics).withColumn("date", F.to_date("store_timestamp"))
    out = Path(out)
    table.write.mode(mode).partitionBy(*PARTITION_COLUMNS).format(fmt).save(str(out))
    partitions = sorted(str(p.relative_to(out)) for p in out.glob("topic=*/date=*") if p.is_dir())
    return ExportResult(out, fmt, partitions)
