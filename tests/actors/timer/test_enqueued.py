"""The timer's enqueue progress reaches ``config/timercheck`` only once the commitlog is flushed past
the timer-topic records it counts, and the timerlog holding their records is flushed."""

from __future__ import annotations

from pathlib import Path

from mqstore.actors.timer.enqueued import Enqueued
from mqstore.engine.config import StoreConfig
from mqstore.engine.timer.log import RECORD_SIZE
from mqstore.engine.timer.store import TimerStore

P = 100
NOW = 1_700_000_000_000
CONFIG = StoreConfig(timer_precision_ms=P, timer_log_file_size=4096)


def test_next_queue_offset_waits_for_the_flush_past_the_records_it_counts(tmp_path: Path) -> None:
    store = TimerStore.open(tmp_path, CONFIG)
    store.checkpoint.last_read_ms = NOW
    enqueued = Enqueued(0, 0)
    for queue_offset, phys in enumerate((1000, 1100, 1200)):
        store.enqueue(phys, 100, NOW + 500, "T", NOW)
        enqueued.counted(queue_offset + 1, phys + 100)
    enqueued.offer(store.log.end_pos)
    enqueued.on_flushed(1200)  # the last record not yet durable
    store.flush(NOW, enqueued.take())
    assert (store.checkpoint.next_queue_offset, store.checkpoint.log_flushed_pos) == (0, 0)
    assert enqueued.next_queue_offset == 3  # the walk goes on meanwhile

    enqueued.on_flushed(1300)
    store.flush(NOW, enqueued.take())
    assert (store.checkpoint.next_queue_offset, store.checkpoint.log_flushed_pos) == (3, 3 * RECORD_SIZE)
    store.close()
