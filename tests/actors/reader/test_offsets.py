"""Consumer offsets as a reader serves them (mqstore.actors.reader.offsets), over a store the builders left."""

from __future__ import annotations

from pathlib import Path

from mqstore.actors.reader.offsets import NOT_OWNER, CommittedOffsets
from mqstore.actors.reader.state import PublishedStore
from mqstore.engine import Message, MessageStore, StoreConfig
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.ipc.wire.requests import CommitOffset, FetchOffset
from tests.conftest import TINY, FakeClock


def _published(store_dir: Path, clock: FakeClock) -> PublishedStore:
    with MessageStore.open(store_dir, StoreConfig(geometry=TINY), now_ms=clock) as writer:
        writer.put_batch([Message("Orders", f"m{i}".encode()) for i in range(5)], [0] * 5)
    published = PublishedStore(store_dir, TINY, index_enabled=False, now_ms=clock)
    published.learn_from_files()
    return published


def test_reader_0_commits_up_to_the_queue_end_and_persists_when_changed(tmp_path: Path) -> None:
    clock = FakeClock()
    store_dir = tmp_path / "store"
    published = _published(store_dir, clock)
    try:
        offsets = CommittedOffsets(store_dir, 0, published, clock)
        fetch = FetchOffset("g", "Orders", 0)
        assert offsets.op_fetch_offset(b"c", 1, fetch)["offset"] == -1
        assert offsets.op_commit_offset(b"c", 2, CommitOffset("g", "Orders", 0, 5))["ok"]
        beyond = offsets.op_commit_offset(b"c", 3, CommitOffset("g", "Orders", 0, 6))
        assert (beyond["ok"], beyond["status"]) == (False, "OFFSET_OVERFLOW_BADLY")
        assert offsets.op_fetch_offset(b"c", 4, fetch)["offset"] == 5
        path = store_dir / CONSUMER_OFFSET_FILE
        offsets.persist(final=False)
        assert ConsumerOffsets.load(path, clock).query("g", "Orders", 0) == 5
        path.unlink()
        offsets.persist(final=True)  # nothing changed since: nothing written
        assert not path.exists()
    finally:
        published.close()


def test_other_readers_send_offsets_to_reader_0(tmp_path: Path) -> None:
    clock = FakeClock()
    store_dir = tmp_path / "store"
    published = _published(store_dir, clock)
    try:
        path = store_dir / CONSUMER_OFFSET_FILE
        before = path.read_bytes()
        offsets = CommittedOffsets(store_dir, 1, published, clock)
        for reply in (offsets.op_fetch_offset(b"c", 1, FetchOffset("g", "Orders", 0)),
                      offsets.op_commit_offset(b"c", 2, CommitOffset("g", "Orders", 0, 1))):
            assert (reply["ok"], reply["status"]) == (False, NOT_OWNER)
        offsets.persist(final=True)
        assert path.read_bytes() == before
    finally:
        published.close()
