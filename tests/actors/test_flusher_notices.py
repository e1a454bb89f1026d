"""The flush service syncs the consume-queue and index files the builders' notices name, and moves
the checkpoint's times past them. Notices travel over PUB/SUB: one lost, or the entries a killed
builder wrote after its last notice, would leave files unsynced under a checkpoint that claims them
durable, and after a power cut recovery would start above the lost entries. So a notice that does
not follow the last one received (first one seen, a gap, another builder process) makes the service
sync every file of that family before the checkpoint moves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from mqstore.actors.config import BrokerConfig
from mqstore.actors.flusher import FlushActor
from mqstore.actors.runtime import Runtime
from mqstore.engine import Geometry, StoreConfig
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.ipc.wire.notices import Arrived, Chain, Indexed

ENTRIES_PER_FILE = 8
EPOCH, NEXT_EPOCH = 41, 97


class Store:
    """Consume queues written as a builder writes them, and what the flush service did, in order:
    ``fsync <topic>/<queue id>/<file>`` or ``checkpoint <logics time>``."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.queues = ConsumeQueueStore.open(root / "consumequeue", ENTRIES_PER_FILE)
        self.events: list[str] = []
        real_flush = Checkpoint.flush

        def flush(checkpoint: Checkpoint) -> None:
            real_flush(checkpoint)
            self.events.append(f"checkpoint {checkpoint.logics_msg_ms}")

        monkeypatch.setattr(Checkpoint, "flush", flush)
        self.flusher = self.new_flusher(monkeypatch)

    def new_flusher(self, monkeypatch: pytest.MonkeyPatch) -> FlushActor:
        geometry = Geometry(commitlog_file_size=64 * 1024, cq_entries_per_file=ENTRIES_PER_FILE)
        flusher = FlushActor(Runtime("flusher", BrokerConfig(str(self.root), StoreConfig(geometry=geometry)),
                                     zmq.Context()))
        real_fsync = flusher.syncer.fsync

        def fsync(path: Path) -> bool:
            synced = real_fsync(path)
            if synced:
                self.events.append(f"fsync {path.relative_to(self.root)}")
            return synced

        monkeypatch.setattr(flusher.syncer, "fsync", fsync)
        return flusher

    def append(self, topic: str, queue_id: int, count: int) -> int:
        """``count`` more entries; the queue's next offset."""
        cq = self.queues.get(topic, queue_id, create=True)
        assert cq is not None
        for _ in range(count):
            end = cq.max_queue_offset
            cq.append(end, 1000 * (end + 1) + queue_id, 100, 0)
        return cq.max_queue_offset

    def deliver(self, notice: Arrived) -> None:
        """The notice received, then the flusher's consume-queue round."""
        self.flusher._on_arrived(Arrived.decode(notice.frames()[1]))
        self.flusher._flush_queues()

    def synced_before_checkpoint(self, file: str, logics_ms: int) -> bool:
        synced = [i for i, e in enumerate(self.events) if e == f"fsync consumequeue/{file}"]
        moved = self.events.index(f"checkpoint {logics_ms}")
        return any(i < moved for i in synced)

    def close(self) -> None:
        self.queues.close()
        self.flusher.warmer.close()
        self.flusher.checkpoint.close()
        self.flusher.syncer.close()
        self.flusher.rt.close()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    s = Store(tmp_path, monkeypatch)
    yield s
    s.close()


def test_entries_a_killed_builder_never_announced_are_synced_before_the_checkpoint_passes_them(
        store: Store) -> None:
    store.deliver(Arrived((("T", 0, store.append("T", 0, 3)),), 300, 100, EPOCH, 0))
    store.append("T", 1, 2)  # written at 200; the builder is killed before its notice
    # its successor resumes from the files and announces only what it writes itself
    store.deliver(Arrived((("T", 0, store.append("T", 0, 1)),), 900, 300, NEXT_EPOCH, 0))
    assert store.flusher.checkpoint.logics_msg_ms == 300
    assert store.synced_before_checkpoint("T/1/00000000000000000000", 300), store.events


def test_a_lost_notice_makes_the_next_round_sync_every_queue(store: Store) -> None:
    store.deliver(Arrived((("T", 0, store.append("T", 0, 3)),), 300, 100, EPOCH, 0))
    store.append("U", 2, ENTRIES_PER_FILE + 1)  # into a second file; its notice (seq 1) is dropped
    store.deliver(Arrived((("T", 0, store.append("T", 0, 1)),), 900, 300, EPOCH, 2))
    for file in ("U/2/00000000000000000000", "U/2/00000000000000000160"):
        assert store.synced_before_checkpoint(file, 300), store.events


def test_a_restarted_flush_service_syncs_what_was_announced_while_it_was_down(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    store.deliver(Arrived((("T", 0, store.append("T", 0, 3)),), 300, 100, EPOCH, 0))
    store.close()
    store.queues = ConsumeQueueStore.open(store.root / "consumequeue", ENTRIES_PER_FILE)
    store.queues.recover()
    store.append("T", 1, 2)  # announced by notice 1, while no flush service listened
    store.flusher = store.new_flusher(monkeypatch)
    store.deliver(Arrived((("T", 0, store.append("T", 0, 1)),), 900, 300, EPOCH, 2))
    assert store.synced_before_checkpoint("T/1/00000000000000000000", 300), store.events


def test_notices_that_follow_each_other_sync_only_what_they_name(store: Store) -> None:
    """No sweep in the steady state: a queue not named is not synced again, and a queue is synced
    from the file its last sync reached."""
    store.deliver(Arrived((("T", 0, store.append("T", 0, ENTRIES_PER_FILE + 2)), ("T", 1, store.append("T", 1, 1))),
                          300, 100, EPOCH, 0))
    store.events.clear()
    store.deliver(Arrived((("T", 0, store.append("T", 0, 1)),), 900, 300, EPOCH, 1))
    assert store.events == ["fsync consumequeue/T/0/00000000000000000160", "checkpoint 300"]


def test_an_index_file_not_named_is_synced_after_a_gap(store: Store) -> None:
    index_dir = store.root / "index"
    index_dir.mkdir()
    for name in ("20240101000000000", "20240101000000001"):
        (index_dir / name).write_bytes(b"x" * 64)
    flusher = store.flusher
    flusher._on_indexed(Indexed(("20240101000000000",), 300, 100, EPOCH, 0))
    flusher._flush_index()
    store.events.clear()
    # notice 1, naming the newer file, is dropped; notice 2 names nothing new
    flusher._on_indexed(Indexed(("20240101000000000",), 900, 300, EPOCH, 2))
    flusher._flush_index()
    assert "fsync index/20240101000000001" in store.events
    assert flusher.checkpoint.index_msg_ms == 300


def test_a_chain_follows_one_builder_process() -> None:
    chain = Chain()
    assert not chain.follows(EPOCH, 0)  # the first one seen: whatever came before is unknown
    assert chain.follows(EPOCH, 1)
    assert not chain.follows(EPOCH, 3)
    assert chain.follows(EPOCH, 4)
    assert not chain.follows(NEXT_EPOCH, 5)
    assert not chain.follows(0, 0) and not chain.follows(0, 1)  # an unnumbered notice never follows
