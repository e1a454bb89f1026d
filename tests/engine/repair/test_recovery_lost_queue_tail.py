"""A power cut keeps what was synced: a consume queue may come back without the entries written
after its last sync, while the commitlog still holds their records. Abnormal recovery starts from the
checkpoint's consume-queue time (the flush service moves it only past synced entries) and writes
them again, so the queue's next offset continues after them and no offset is given twice.

A checkpoint written wrong (by an older version, or any other cause) can put the consume-queue time
past the entries the power cut lost: recovery must still open the store and lose nothing (when the
re-dispatch finds a queue short of the entries before its first record, it starts again a commitlog
file earlier, down to the first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.engine import Message, MessageStore, PutResult, StoreConfig
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.engine.meta.metafile import create_abort
from mqstore.engine.repair.verify import verify_store
from tests.conftest import TINY, FakeClock

STEP_MS = 10_000  # far apart: the checkpoint's 3 s margin reaches no earlier record
COUNT = 120
SYNCED = 60  # the consume queues were synced up to this record's entry, and the checkpoint says so
PAST_THE_LOSS = SYNCED + 40  # a checkpoint's consume-queue time written wrong: past entries the cut lost


def _lose_queue_tail(path: Path, queue_id: int, from_queue_offset: int) -> None:
    """What a power cut leaves of pages never synced: zeros in the file, and no file made after."""
    for f in sorted((path / "consumequeue" / "Orders" / str(queue_id)).iterdir()):
        first = int(f.name) // CQ_ENTRY_SIZE
        if first >= from_queue_offset:
            f.unlink()
        elif first + TINY.cq_entries_per_file > from_queue_offset:
            data = bytearray(f.read_bytes())
            keep = (from_queue_offset - first) * CQ_ENTRY_SIZE
            data[keep:] = bytes(len(data) - keep)
            f.write_bytes(bytes(data))


@pytest.mark.parametrize("checkpoint_at", [SYNCED, PAST_THE_LOSS], ids=["checkpoint_right", "checkpoint_wrong"])
def test_a_queue_tail_lost_in_a_power_cut_is_written_again_before_its_offsets_continue(
        tmp_path: Path, checkpoint_at: int) -> None:
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
    checkpoint.logics_msg_ms = checkpoint.index_msg_ms = store_ms[checkpoint_at]
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
