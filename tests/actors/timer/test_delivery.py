"""The timer's delivery progress reaches ``config/timercheck`` only once the commitlog is flushed past
the copies it counts and the checkpoint counts the records it delivered as enqueued."""

from __future__ import annotations

from pathlib import Path

from mqstore.actors.timer.delivery import Delivery
from mqstore.actors.timer.enqueued import Enqueued
from mqstore.engine.config import StoreConfig
from mqstore.engine.timer.store import TimerStore

P = 100
NOW = 1_700_000_000_000
CONFIG = StoreConfig(timer_precision_ms=P, timer_log_file_size=4096)


def test_a_slot_read_is_written_only_behind_the_enqueue_of_its_records(tmp_path: Path) -> None:
    """A power cut kept a slot marked read while the timerlog records delivered in it, and the
    enqueue's mark counting them, were lost: recovery enqueued those entries again into the slot being
    read and delivered them a second time."""
    store = TimerStore.open(tmp_path, CONFIG)
    store.checkpoint.last_read_ms = NOW
    enqueued = Enqueued(0, 0)
    for queue_offset, phys in enumerate((1000, 1100)):
        store.enqueue(phys, 100, NOW, "T", NOW)
        enqueued.counted(queue_offset + 1, phys + 100)
    enqueued.offer(store.log.end_pos)
    delivery = Delivery(store.checkpoint, NOW + P)
    delivery.last_read_ms = NOW + P  # the slot's two records delivered, copies stored at 5000 and 5200
    delivery.delivered_slot_ms, delivery.delivered_pos = NOW, 52
    delivery.batch_done(5000)
    delivery.stored_end = 5201
    delivery.offer(enqueued.next_queue_offset)

    delivery.on_flushed(6000)  # the copies are durable; the timer's flush has not come yet
    assert store.checkpoint.last_read_ms == NOW

    enqueued.on_flushed(6000)
    store.flush(NOW, enqueued.take())
    delivery.on_flushed(6000)
    assert (store.checkpoint.next_queue_offset, store.checkpoint.last_read_ms) == (2, NOW + P)
    assert (store.checkpoint.delivered_slot_ms, store.checkpoint.delivered_pos) == (NOW, 52)
    store.close()
