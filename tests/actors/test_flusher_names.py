"""The flush service makes the names of files others created durable before the checkpoint counts
them: a consume-queue file and its queue, topic and ``consumequeue`` directories (made by the
consume-queue builder), an index file (made by the index builder), and the ``commitlog`` directory
itself. A power cut keeps a file's bytes only if its directory entry was synced too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.actors.flusher import FlushActor
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.ipc.wire.notices import Arrived, Indexed
from tests.actors.test_flusher_spare import close, make_flusher
from tests.fsyncs import made_durable_before, record_fsyncs


@pytest.fixture
def flusher(tmp_path: Path) -> Iterator[FlushActor]:
    flusher = make_flusher(tmp_path, spare=False)
    yield flusher
    close(flusher)


def test_consume_queue_file_and_directories_are_named_durably_before_the_checkpoint(
        tmp_path: Path, flusher: FlushActor, monkeypatch: pytest.MonkeyPatch) -> None:
    queues = ConsumeQueueStore.open(tmp_path / "consumequeue", 4)  # a file every 4 entries: rolls
    try:
        cq = queues.get("NewTopic", 3, create=True)
        assert cq is not None
        for queue_offset in range(6):
            cq.append(queue_offset, queue_offset * 100, 100, 0)
    finally:
        queues.close()
    queue_dir = tmp_path / "consumequeue" / "NewTopic" / "3"
    files = sorted(queue_dir.iterdir())
    assert len(files) == 2
    flusher.cq_file_size = files[0].stat().st_size
    synced = record_fsyncs(monkeypatch)
    flusher._on_arrived(Arrived((("NewTopic", 3, 6),), 600, 1_700_000_000_000))
    flusher._flush_queues()
    checkpoint = tmp_path / "checkpoint"
    for name in (*files, queue_dir, queue_dir.parent, queue_dir.parent.parent):
        assert made_durable_before(synced, name, checkpoint), name


def test_an_index_file_is_named_durably_before_the_checkpoint(
        tmp_path: Path, flusher: FlushActor, monkeypatch: pytest.MonkeyPatch) -> None:
    index_file = tmp_path / "index" / "20260101000000000"
    index_file.parent.mkdir()
    index_file.write_bytes(b"i" * 4096)
    synced = record_fsyncs(monkeypatch)
    flusher._on_indexed(Indexed((index_file.name,), 0, 1_700_000_000_000))
    flusher._flush_index()
    assert made_durable_before(synced, index_file, tmp_path / "checkpoint")
    assert made_durable_before(synced, index_file.parent, tmp_path / "checkpoint")
