"""Every file and directory the engine makes whose name must survive a power cut has its directory
(and a new directory's parent) fsynced before anything that depends on it counts it durable: consume
queues flushed by their owner (the embedded store, recovery), the commitlog's and the store's own
directories, timerlog files before the timer checkpoint, the timer wheel and checkpoint files, an
ack index's group, topic and queue directories, metadata files in a directory made for them, and the
CURVE key directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.engine.ackindex.queue_index import QueueIndex
from mqstore.engine.config import StoreConfig
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.message import Message
from mqstore.engine.meta.metafile import write_atomic
from mqstore.engine.store import MessageStore
from mqstore.engine.timer.checkpoint import TimerCheckpoint
from mqstore.engine.timer.store import TimerStore
from mqstore.ipc.transport.curve import generate_keys
from tests.fsyncs import made_durable_before, record_fsyncs

NOW = 1_700_000_000_000


def test_a_consume_queue_flushed_by_its_owner_has_its_names_durable(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    queues = ConsumeQueueStore.open(tmp_path / "consumequeue", 4)
    try:
        cq = queues.get("T", 0, create=True)
        assert cq is not None
        for queue_offset in range(6):  # two files
            cq.append(queue_offset, queue_offset * 100, 100, 0)
        synced = record_fsyncs(monkeypatch)
        queues.flush(0)
        queue_dir = tmp_path / "consumequeue" / "T" / "0"
        assert len(list(queue_dir.iterdir())) == 2  # their bytes are msynced; their names:
        assert {queue_dir, queue_dir.parent, queue_dir.parent.parent, tmp_path} <= set(synced)
    finally:
        queues.close()


def test_a_new_store_and_its_commitlog_directory_are_named_durably(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    synced = record_fsyncs(monkeypatch)
    with MessageStore.open(tmp_path / "stores" / "s", StoreConfig()) as store:
        store.put(Message("T", b"body"))
        store.flush()
    for directory in (tmp_path / "stores", tmp_path / "stores" / "s", tmp_path / "stores" / "s" / "commitlog"):
        assert made_durable_before(synced, directory, tmp_path / "stores" / "s" / "checkpoint"), directory
    synced.clear()
    log = CommitLog.open(tmp_path / "alone" / "commitlog")
    log.close()
    assert synced == [tmp_path, tmp_path / "alone"]


def test_a_rolled_timerlog_file_is_named_durably_before_the_timer_checkpoint(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    synced = record_fsyncs(monkeypatch)
    store = TimerStore.open(tmp_path, StoreConfig(timer_precision_ms=100, timer_roll_window_slot=100,
                                                  timer_log_file_size=4096))
    try:
        assert tmp_path in synced  # timerwheel's name
        assert tmp_path / "config" in synced  # timercheck's name, in a directory made for it
        store.checkpoint.last_read_ms = NOW
        real_flush = TimerCheckpoint.flush
        monkeypatch.setattr(TimerCheckpoint, "flush",
                            lambda self, now_ms: (synced.append(self.path), real_flush(self, now_ms))[1])
        for i in range(200):  # a 4 KiB timerlog rolls
            store.enqueue(i * 100, 100, NOW + 10_000, None, NOW)
        files = sorted((tmp_path / "timerlog").iterdir())
        assert len(files) >= 2
        synced.clear()
        store.flush(NOW)
        checkpoint = tmp_path / "config" / "timercheck"
        for name in (*files, tmp_path / "timerlog"):
            assert made_durable_before(synced, name, checkpoint), name
    finally:
        store.close()


def test_an_ack_index_makes_each_new_directory_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced = record_fsyncs(monkeypatch)
    queue_dir = tmp_path / "queueindex" / "G" / "T" / "0"
    QueueIndex.open(queue_dir).close()
    for directory in (queue_dir, queue_dir.parent, queue_dir.parent.parent):
        assert directory.parent in synced, directory
    assert queue_dir in synced  # journal.jif's name


def test_a_metadata_file_in_directories_made_for_it_has_every_name_durable(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    synced = record_fsyncs(monkeypatch)
    write_atomic(tmp_path / "a" / "config" / "topics.json", b"{}")
    assert {tmp_path, tmp_path / "a", tmp_path / "a" / "config"} <= set(synced)


def test_curve_key_directories_are_named_durably(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced = record_fsyncs(monkeypatch)
    written = generate_keys(tmp_path / "keys")
    assert tmp_path in synced and tmp_path / "keys" in synced  # the key directory's name, and clients/'s
    for path in written:
        assert path.parent in synced
