"""A store that fails to open leaves nothing open: found by scripts/survival/fuzz (recovery on damaged
store files ran the process out of file descriptors)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore.engine import Geometry, Message, MessageStore, StoreConfig
from mqstore.engine.log.mapped_file import MappedFileError
from mqstore.engine.meta.checkpoint import CheckpointError

GEOMETRY = Geometry(commitlog_file_size=8 * 1024, cq_entries_per_file=16, index_slot_count=16, index_entry_count=64)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _store(path: Path) -> Path:
    with MessageStore.open(path, StoreConfig(geometry=GEOMETRY)) as store:
        for i in range(40):
            store.put(Message(f"T{i % 3}", b"x" * 100, keys=(f"k{i}",)), queue_id=i % 2)
    return path


@pytest.mark.parametrize(("damage", "error"), [
    ("checkpoint", CheckpointError),                               # opened after commitlog, queues, index
    ("consumequeue/T2/1/00000000000000000000", MappedFileError),   # after the commitlog and other queues
])
def test_a_store_that_fails_to_open_closes_what_it_opened(tmp_path: Path, damage: str,
                                                          error: type[Exception]) -> None:
    """MessageStore.open closed only its lock when a part failed to open: the commitlog, consume
    queues and index files opened before it stayed mapped, their descriptors open. 30,000 damaged
    stores in one process (the fuzz harness) ran out of descriptors (EMFILE) after a few thousand."""
    path = _store(tmp_path / "store")
    (path / damage).write_bytes(b"\x01" * 100)
    before = _open_fds()
    for _ in range(3):
        with pytest.raises(error):
            MessageStore.open(path)
    assert _open_fds() == before
