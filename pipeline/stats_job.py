"""``stats``: traffic per topic and minute (UTC), aggregated by Spark over the ``mqstore`` source.

Per (topic, minute): messages, bytes (sum of record sizes), distinct keys (KEYS tokens), and the
count per tag (``""`` for messages without tags). Written as ``stats.csv`` and ``stats.json`` by
``write_tables``; ``mqstore.pipeline.report`` prints them and plots them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mqstore.pipeline.export_job import read_store

MINUTE_MS = 60_000
NO_TAG = ""
CSV_NAME, JSON_NAME, PNG_NAME = "stats.csv", "stats.json", "stats.png"


@dataclass(frozen=True, slots=True)
class MinuteStats:
    topic: str
    minute_ms: int          # start of the minute, UTC epoch ms
    messages: int
    bytes: int
    keys: int               # distinct KEYS tokens
    tags: dict[str, int]    # messages per tag; NO_TAG for those without

    @property
    def minute(self) -> datetime:
        return utc_minute(self.minute_ms)

    def as_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "minute": self.minute.strftime("%Y-%m-%dT%H:%M:%SZ"), "messages": self.messages,
                "bytes": self.bytes, "keys": self.keys, "tags": self.tags}


def utc_minute(minute_ms: int) -> datetime:
    return datetime.fromtimestamp(minute_ms / 1000, UTC)


def traffic_stats(spark: Any, store_dir: Path | str, *, topics: Sequence[str] | None = None) -> list[MinuteStats]:
    """One row per topic and minute with traffic, sorted by topic and minute."""
    from pyspark.sql import functions as F

    table = read_store(spark, store_dir, topics=topics, include_body=False)
    # integer minutes: no time zone can shift them on the way to the driver
    base = table.select("topic", (F.floor(F.unix_millis("store_timestamp") / MINUTE_MS) * MINUTE_MS)
                        .alias("minute_ms"), "size", "keys", F.coalesce("tags", F.lit(NO_TAG)).alias("tag"))
    base = base.persist()  # three aggregations over one read of the store
    try:
        group = ["topic", "minute_ms"]
        totals = base.groupBy(*group).agg(F.count(F.lit(1)).alias("messages"), F.sum("size").alias("bytes"))
        keys = base.select(*group, F.explode("keys").alias("key")).groupBy(*group) \
            .agg(F.count_distinct("key").alias("keys"))
        tags = base.groupBy(*group, "tag").agg(F.count(F.lit(1)).alias("n")).groupBy(*group) \
            .agg(F.map_from_entries(F.collect_list(F.struct("tag", "n"))).alias("tags"))
        rows = totals.join(keys, group, "left").join(tags, group, "left").orderBy(*group).collect()
    finally:
        base.unpersist()
    return [MinuteStats(r["topic"], int(r["minute_ms"]), int(r["messages"]), int(r["bytes"]), int(r["keys"] or 0),
                        dict(sorted((r["tags"] or {}).items()))) for r in rows]


def write_tables(rows: Sequence[MinuteStats], out_dir: Path) -> tuple[Path, Path]:
    """``stats.csv`` (tags as a JSON object per row) and ``stats.json`` (a list of rows) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out_dir / CSV_NAME, out_dir / JSON_NAME
    objects = [row.as_json() for row in rows]
    with csv_path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["topic", "minute", "messages", "bytes", "keys", "tags"])
        for obj in objects:
            writer.writerow([obj["topic"], obj["minute"], obj["messages"], obj["bytes"], obj["keys"],
                             json.dumps(obj["tags"], sort_keys=True)])
    json_path.write_text(json.dumps(objects, indent=1) + "\n")
    return csv_path, json_path
