"""The consumer's prefetch under a backlog of millions: a real broker, the real Consumer in this
process, small prefetch bounds so that the backlog is many times what a consumer may hold. What the
consumer buffers per queue never passes the bounds, and every message comes, in order per queue."""

from __future__ import annotations

import struct
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from mqstore.ipc.client.api import Consumer, Producer
from tests.integration.broker import Broker

BACKLOG = 2_000_000
BATCH = 4000
PREFETCH_MESSAGES = 6000
PREFETCH_BYTES = 256 * 1024
SEQ = struct.Struct(">q")
# the backlog stays whole however full the (shared) disk is: retention would delete files under the consumer
KEEP_FILES = ("\n[retention]\ndisk_max_used_space_ratio = 0.99\ndisk_clean_forcibly_ratio = 0.99\n"
              "disk_warning_ratio = 1.0\n")


@pytest.mark.slow
def test_buffered_messages_and_bytes_stay_within_the_prefetch_bounds(tmp_path: Path) -> None:
    with Broker(tmp_path, commitlog=64 * 1024 * 1024, cq=300_000, extra_toml=KEEP_FILES) as broker:
        with Producer(broker.store, timeout_ms=30_000) as producer:
            in_flight: list[Future[Any]] = []
            for first in range(0, BACKLOG, BATCH):
                in_flight.append(producer.send_encoded_columns_async(
                    "Backlog", [SEQ.pack(seq) for seq in range(first, first + BATCH)]))
                if len(in_flight) == 8:
                    assert all(r.ok for r in in_flight.pop(0).result())
            assert all(r.ok for f in in_flight for r in f.result())
        with Consumer(broker.store, group="prefetch", topic="Backlog", start="earliest", auto_commit=False,
                      long_poll_ms=200, timeout_ms=30_000, max_per_pull=2000, max_bytes_per_pull=64 * 1024,
                      prefetch_messages=PREFETCH_MESSAGES, prefetch_bytes=PREFETCH_BYTES) as consumer:
            last_seq = dict.fromkeys(consumer.queues, -1)
            most_count = most_bytes = got = 0
            fill_deadline = time.monotonic() + 30
            while got < BACKLOG:
                before = {queue: consumer.position(queue) for queue in consumer.queues}
                # first a slow application, a message a poll, until the readers have filled the
                # buffers; then one that keeps up
                filled = most_count > PREFETCH_MESSAGES // 2 or most_bytes > PREFETCH_BYTES // 2
                assert filled or time.monotonic() < fill_deadline, "the readers never filled the prefetch"
                batch = consumer.poll_batch(timeout_ms=5000, max_count=1000 if filled else 1)
                assert batch, f"nothing more after {got} messages"
                for queue in consumer.queues:
                    count, size = consumer.buffered(queue)
                    assert count <= PREFETCH_MESSAGES and size <= PREFETCH_BYTES
                    most_count, most_bytes = max(most_count, count), max(most_bytes, size)
                # a batch holds each queue's run in turn: the positions say how long each run is
                offsets, seqs = batch.queue_offsets, [SEQ.unpack(body)[0] for body in batch.bodies()]
                at = 0
                for queue in consumer.queues:
                    run = consumer.position(queue) - before[queue]
                    assert offsets[at:at + run] == list(range(before[queue], before[queue] + run))
                    queue_seqs = seqs[at:at + run]
                    assert queue_seqs == sorted(queue_seqs) and (not run or queue_seqs[0] > last_seq[queue])
                    last_seq[queue] = queue_seqs[-1] if run else last_seq[queue]
                    at += run
                assert at == len(batch)
                got += len(batch)
            assert got == BACKLOG and sum(consumer.position(q) for q in consumer.queues) == BACKLOG
            assert consumer.poll(timeout_ms=300) == []
