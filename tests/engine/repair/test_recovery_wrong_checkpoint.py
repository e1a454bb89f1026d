"""A checkpoint written wrong (by an older version, or any other cause) can put the consume-queue
time past entries a power cut lost. Recovery must still open the store and lose nothing: when the
re-dispatch finds a queue short of the entries before its first record, it starts again a
commitlog file earlier, down to the first."""

from __future__ import annotations

from pathlib import Path

from mqstore.engine import Message, MessageStore, PutResult, StoreConfig
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.engine.meta.metafile import create_abort
from mqstore.engine.repair.verify import verify_store
from tests.conftest import TINY, FakeClock
from tests.engine.repair.test_recovery_lost_queue_tail import COUNT, STEP_MS, SYNCED, _lose_queue_tail

PAST_THE_LOSS = SYNCED + 40  # the checkpoint's consume-queue time: past entries the power cut lost


def test_a_checkpoint_past_a_lost_queue_tail_still_opens_with_nothing_lost(tmp_path: Path) -> None:
    clock, path = FakeClock(), tmp_path / "store"
    config = StoreConfig(geometry=TINY)
    results: list[PutResult] = []
    with MessageStore.open(path, config, now_ms=clock) as store:
        for i in range(COUNT):
            clock.advance(STEP_MS)
            results.append(store.put(Message("Orders", f"body-{i}".encode() * 7), queue_id=i % 2))
    checkpoint = Checkpoint.open(path / "checkpoint")
    store_ms = [clock.now - STEP_MS * (COUNT - 1 - i) for i in range(COUNT)]
    checkpoint.physic_msg_ms = store_ms[-1]
    checkpoint.logics_msg_ms = checkpoint.index_msg_ms = store_ms[PAST_THE_LOSS]
    checkpoint.flush()
    checkpoint.close()
    lost = [r for r in results[SYNCED + 1:] if r.queue_id == 1]
    _lose_queue_tail(path, 1, lost[0].queue_offset)
    create_abort(path, 1)

    with MessageStore.open(path, config, now_ms=clock) as store:
        assert store.recovery.abnormal
        assert store.max_queue_offset("Orders", 1) == COUNT // 2
        got = store.get("Orders", 1, lost[0].queue_offset, max_count=64, max_bytes=1 << 20)
        assert [m.phys_offset for m in got.messages] == [r.phys_offset for r in lost]
        assert store.put(Message("Orders", b"after the cut"), queue_id=1).queue_offset == COUNT // 2
    assert verify_store(path).ok
