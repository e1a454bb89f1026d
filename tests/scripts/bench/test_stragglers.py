"""The straggler trace: a message slower than the bound is kept with the stamps of every hop it
crossed, read from a real broker and a traced consumer."""

from __future__ import annotations

import gc
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.scripts.bench.load import STAMP_BYTES, now_us
from mqstore.scripts.bench.stragglers import (
    COLUMNS,
    RECENT_PULLS,
    ConsumerTrace,
    gc_summary,
    hop_percentiles,
    sampled_of,
    straggler_steps,
    stragglers_of,
    traced_rows,
)
from tests.integration.broker import Broker

# sends are taken whatever the shared disk holds
ROOMY_DISK = ("\n[retention]\ndisk_max_used_space_ratio = 0.99\ndisk_clean_forcibly_ratio = 0.995\n"
              "disk_warning_ratio = 1.0\n")


def test_a_slow_message_is_kept_with_its_pull_stamps(tmp_path: Path) -> None:
    with Broker(tmp_path, extra_toml=ROOMY_DISK) as broker:
        with Admin(broker.store) as admin:
            admin.create_topic("Slow", 1)
        old = now_us() - 2_000_000  # sent "two seconds ago": a straggler at any bound under that
        with Producer(broker.store) as producer:
            results = producer.send_encoded_columns_async(
                "Slow", [old.to_bytes(STAMP_BYTES, "big") + b"a", now_us().to_bytes(STAMP_BYTES, "big") + b"b"]
            ).result()
            assert all(r.ok for r in results)
        with Consumer(broker.store, group="g", topic="Slow", start="earliest", auto_commit=False,
                      trace=True) as consumer:
            batch = consumer.poll_batch(timeout_ms=5000)
            while len(batch) < 2:
                batch = type(batch).join([batch, consumer.poll_batch(timeout_ms=5000)])
            received = now_us()
            stamps = np.frombuffer(batch.body_heads(STAMP_BYTES), dtype=">i8").astype(np.int64)
            rows = stragglers_of(batch, received - stamps, received, 1_000_000, consumer.pull_trace)
            # one message came before this batch: every second message is the batch's second
            sampled = sampled_of(batch, 1, 2, received, consumer.pull_trace)
    assert rows.shape == (1, len(COLUMNS))
    row = dict(zip(COLUMNS, rows[0].tolist(), strict=True))
    assert (row["queue"], row["queue_offset"], row["send_us"]) == (0, 0, old)
    assert row["phys_offset"] == results[0].phys_offset
    assert 0 < row["pulled_us"] <= row["taken_us"] <= row["received_us"]
    assert row["replied_us"] > 0 and row["store_ms"] * 1000 >= old

    # the listener heard the record dispatched 1 ms after its store time and arrived 1 ms later
    store_us = row["store_ms"] * 1000
    seen = {"dispatch": [(row["phys_offset"] + 1, store_us + 1000)],
            "arrived": [(row["phys_offset"] + 1, store_us + 2000)]}
    (slow,) = straggler_steps(rows, seen)
    assert slow["total_ms"] == (row["received_us"] - old) / 1000
    assert slow["steps_ms"]["store -> dispatch"] == 1.0
    assert slow["steps_ms"]["dispatch -> arrived"] == 1.0
    assert slow["steps_ms"]["dispatch -> flushed"] is None  # no flushed notice heard
    assert slow["steps_ms"]["taken -> received"] == (row["received_us"] - row["taken_us"]) / 1000

    # the sample is the typical message, slow or not, with the same stamps
    assert sampled.shape == (1, len(COLUMNS))
    assert sampled[0, COLUMNS.index("queue_offset")] == 1
    assert sampled[0, COLUMNS.index("replied_us")] > 0
    hops = hop_percentiles(np.concatenate([rows, sampled]), seen)
    assert hops["send -> received"]["samples"] == 2
    assert hops["send -> received"]["max"] == slow["total_ms"]
    assert hops["dispatch -> arrived"]["samples"] == 1  # the notices heard cover the first record only
    assert hops["dispatch -> flushed"]["samples"] == 0


def test_a_traced_message_names_its_pull_and_the_queues_pull_before_it() -> None:
    """The carrying pull is found among the recent ones, the queue's pull before it however many
    pulls of other queues came between (``prev_taken -> pulled``: how long the consumer held back)."""
    # (queue, first, last, replied_us, taken_us, pulled_us)
    trace = deque([(0, 0, 9, 100, 110, 90), *((1, i, i, 0, 0, 0) for i in range(RECENT_PULLS + 10)),
                   (0, 10, 19, 300, 310, 250)])
    message = SimpleNamespace(queue_id=0, queue_offset=15, phys_offset=1234, store_ms=5,
                              body=(7).to_bytes(STAMP_BYTES, "big"))
    (row,) = traced_rows([message], np.asarray([0]), 400, trace)
    got = dict(zip(COLUMNS, row.tolist(), strict=True))
    assert (got["replied_us"], got["taken_us"], got["pulled_us"]) == (300, 310, 250)
    assert (got["prev_replied_us"], got["prev_taken_us"]) == (100, 110)
    assert (got["send_us"], got["received_us"], got["phys_offset"]) == (7, 400, 1234)
    unknown = SimpleNamespace(queue_id=2, queue_offset=0, phys_offset=0, store_ms=0, body=bytes(STAMP_BYTES))
    assert traced_rows([unknown], np.asarray([0]), 400, trace)[0, COLUMNS.index("pulled_us")] == 0

    consumer = ConsumerTrace(over_ms=None, sample_every=0)
    gc.collect()
    pauses = consumer.rows()["gc_pauses_us"]
    assert pauses.shape[1] == 3 and gc_summary(pauses)["gen2"]["count"] >= 1
