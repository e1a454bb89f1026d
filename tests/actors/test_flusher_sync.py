"""No wait of the flush service's own on a SYNC_FLUSH send's path: ``flushed`` goes out before the
checkpoint's fsync, and a send that comes while derived files are being fsynced is flushed between
two of them, not after the whole round."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore.actors.flusher import FlushActor
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.ipc.wire import schema
from tests.actors.test_flusher_spare import FILE_SIZE, close, make_flusher


class Recorder:
    """A flushed_out socket that notes what was published, in the order of everything else noted."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def send_multipart(self, frames: list[bytes]) -> None:
        assert frames[0] == schema.FLUSHED
        self.events.append("flushed")


@pytest.fixture
def flusher(tmp_path: Path) -> Any:
    log = CommitLog.open(tmp_path / "commitlog", FILE_SIZE)
    log.queue.last_file_for_append(0).append(b"r" * 100)
    flusher = make_flusher(tmp_path)
    flusher.written_end, flusher.written_store_ms = log.max_offset, 1_700_000_000_000
    yield flusher
    close(flusher)
    log.close()


def test_flushed_goes_out_before_the_checkpoint_is_fsynced(flusher: FlushActor,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(Checkpoint, "flush", lambda self: events.append("checkpoint"))
    flusher.sync_wanted = True
    flusher._flush_commitlog(Recorder(events), 0)  # type: ignore[arg-type]
    assert events == ["flushed", "checkpoint"]
    assert flusher.flushed_end == flusher.written_end and flusher.checkpoint.physic_msg_ms == 1_700_000_000_000


def test_consume_queue_and_index_fsyncs_let_a_sync_send_in_between(flusher: FlushActor,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(flusher.syncer, "fsync", lambda path: events.append(f"fsync {path.parent.name}") or True)
    monkeypatch.setattr(Checkpoint, "flush", lambda self: None)
    flusher.queue_max = {("T", 0): 10, ("T", 1): 10, ("T", 2): 10}
    flusher.index_files = {"a", "b"}
    flusher._flush_queues(lambda: events.append("between"))
    flusher._flush_index(lambda: events.append("between"))
    assert events == ["fsync 0", "between", "fsync 1", "between", "fsync 2", "between",
                      "fsync index", "between", "fsync index", "between"]
