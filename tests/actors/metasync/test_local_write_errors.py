"""A slave's metadata sync that cannot write an item to its own files (a full disk) says so for that
item and goes on with the others: it once took the OSError for the master's connection, marked every
item "unreachable" and ended the round."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from mqstore.actors.metasync import actor as metasync
from mqstore.engine.meta.data_version import DataVersion


class FakeMaster:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def topics(self) -> tuple[dict[str, Any], DataVersion]:
        return {}, DataVersion(0, 1, 2)

    def consumer_offsets(self) -> list[Any]:
        return []

    def delay_offsets(self) -> dict[int, int]:
        return {1: 5}

    def timer_checkpoint(self) -> None:
        return None

    def ack_marks(self) -> dict[Any, int]:
        return {}

    def close(self) -> None:
        pass


def test_a_full_disk_here_is_that_items_error_not_the_masters_loss(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(*args: Any) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(metasync, "MasterMetadata", FakeMaster)
    monkeypatch.setattr(metasync, "apply_topics", disk_full)
    monkeypatch.setattr(metasync, "apply_delay_offsets", lambda *args: None)
    sync = object.__new__(metasync.MetadataSyncActor)
    sync.store_dir, sync.host, sync.port, sync.credentials, sync.readers = tmp_path, "127.0.0.1", 1, None, 1
    sync.items = dict.fromkeys(metasync.ITEMS, "never")
    sync.unreachable, sync.rounds, sync.last_sync_ms, sync.data_version = None, 0, -1, -1
    sync.offsets_moved = sync.offsets_clamped = sync.ack_marks_seen = 0
    sync.ack_queues_moved = sync.ack_acked = sync.ack_clamped = 0
    sync._offsets = lambda master: None  # type: ignore[method-assign]  # reader 0 is not there
    sync.sync()
    assert sync.unreachable is None and sync.rounds == 1
    assert sync.items["topics"].startswith("error: writing topics.json here failed")
    assert sync.items["delay_offsets"] == "ok" and sync.items["timer_checkpoint"] == "ok"
