"""``spark.readStream.format("mqstore")``: per-queue offsets, restarts from the checkpoint, limits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mqstore.engine import Message, MessageStore, StoreConfig
from tests.pipeline.conftest import STORE_GEOMETRY, STORE_MESSAGES, STORE_QUEUES, STORE_TOPICS, write_messages

pytestmark = pytest.mark.spark


Row = tuple[str, int, int, str]


def run_available_now(spark: Any, store: Path, checkpoint: Path, **options: str) -> list[list[Row]]:
    """One availableNow run: the rows of each micro-batch as (topic, queue id, queue offset, seq)."""
    batches: list[list[Row]] = []

    def collect(df: Any, batch_id: int) -> None:
        rows = df.select("topic", "queue_id", "queue_offset", "properties").collect()
        batches.append([(r.topic, r.queue_id, r.queue_offset, r.properties.get("seq", "")) for r in rows])

    query = (spark.readStream.format("mqstore").options(**options).load(str(store))
             .writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None
    return batches


def seqs(batches: list[list[Row]]) -> list[int]:
    return sorted(int(row[3]) for batch in batches for row in batch if row[3])


@pytest.fixture
def live_store(store_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(store_dir, copy)
    return copy


def test_restart_on_the_checkpoint_reads_exactly_what_is_new(spark: Any, live_store: Path, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    first = run_available_now(spark, live_store, checkpoint)
    assert seqs(first) == list(range(STORE_MESSAGES))

    write_messages(live_store, STORE_MESSAGES, 250)
    with MessageStore.open(live_store, StoreConfig(geometry=STORE_GEOMETRY)) as store:  # a topic new since
        assert all(r.ok for r in store.put_batch([Message("Fresh", b"new")] * 3, 5))
    second = run_available_now(spark, live_store, checkpoint)
    rows = [row for batch in second for row in batch]
    assert seqs(second) == list(range(STORE_MESSAGES, STORE_MESSAGES + 250))
    assert sorted(row[:3] for row in rows if row[0] == "Fresh") == [("Fresh", 5, 0), ("Fresh", 5, 1), ("Fresh", 5, 2)]

    assert run_available_now(spark, live_store, checkpoint) == []  # nothing new: no batch at all

    # Spark's checkpoint holds our offsets verbatim: every queue's next offset
    last = max((checkpoint / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    offsets = json.loads(last.read_text().splitlines()[-1])
    assert offsets["Fresh"] == {"5": 3}
    assert sum(sum(q.values()) for q in offsets.values()) == STORE_MESSAGES + 250 + 3
    assert set(offsets["Orders"]) == {str(q) for q in range(STORE_QUEUES)}


def test_starting_offsets_latest_and_json(spark: Any, live_store: Path, tmp_path: Path) -> None:
    latest = tmp_path / "latest"
    assert seqs(run_available_now(spark, live_store, latest, startingOffsets="latest")) == []
    write_messages(live_store, STORE_MESSAGES, 100)
    assert seqs(run_available_now(spark, live_store, latest)) == list(range(STORE_MESSAGES, STORE_MESSAGES + 100))

    # queues the JSON does not name start at their earliest; -1 means latest
    start = json.dumps({"Orders": {"0": 200}, "Audit": {"3": -1}})
    rows = [row for b in run_available_now(spark, live_store, tmp_path / "json", startingOffsets=start) for row in b]
    total = STORE_MESSAGES + 100
    orders_0 = [i for i in range(total) if i % len(STORE_TOPICS) == 0 and i % STORE_QUEUES == 0]
    audit_3 = [i for i in range(total) if i % len(STORE_TOPICS) == 2 and i % STORE_QUEUES == 3]
    assert sorted(int(r[3]) for r in rows) == sorted(set(range(total)) - set(orders_0[:200]) - set(audit_3))
    assert min(r[2] for r in rows if r[:2] == ("Orders", 0)) == 200


def test_max_offsets_per_trigger_splits_the_backlog(spark: Any, store_dir: Path, tmp_path: Path) -> None:
    batches = run_available_now(spark, store_dir, tmp_path / "ck", maxOffsetsPerTrigger="700", topics="Orders,Audit")
    assert len(batches) == 3 and [len(b) for b in batches] == [700, 700, 600]
    assert seqs(batches) == [i for i in range(STORE_MESSAGES) if STORE_TOPICS[i % 3] in ("Orders", "Audit")]
    for batch in batches:  # spread over the queues, in queue order within each
        assert len({row[:2] for row in batch}) == 8


def test_bad_starting_offsets_is_a_clear_error(spark: Any, store_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="startingOffsets must be earliest, latest or JSON"):
        run_available_now(spark, store_dir, tmp_path / "ck", startingOffsets="{not json")
