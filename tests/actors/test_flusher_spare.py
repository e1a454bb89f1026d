"""The flush service's part in the spare next commitlog file: it warms the pages ahead of the writer
first and prepares the spare with what the round has left, never while a group commit waits, says
once why a spare was skipped, and makes a new file's name durable before claiming its bytes."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import zmq

from mqstore.actors.config import BrokerConfig, FlushConfig
from mqstore.actors.flusher import FlushActor, fsync_dir
from mqstore.actors.runtime import Runtime
from mqstore.engine import Geometry, StoreConfig
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file_queue import SPARE_NAME, SPARE_PREPARING_NAME

FILE_SIZE = 8 * 1024 * 1024  # two of the warmer's 4 MiB steps: ahead-warming and the spare share a round


def make_flusher(store_dir: Path, spare: bool = True) -> FlushActor:
    config = BrokerConfig(str(store_dir), StoreConfig(geometry=Geometry(commitlog_file_size=FILE_SIZE)),
                          FlushConfig(spare_file=spare))
    return FlushActor(Runtime("flusher", config, zmq.Context()))


def close(flusher: FlushActor) -> None:
    flusher.warmer.close()
    flusher.checkpoint.close()
    flusher.syncer.close()
    flusher.rt.close()


def test_a_round_warms_ahead_then_prepares_the_spare(tmp_path: Path, populate_read: None) -> None:
    log = CommitLog.open(tmp_path / "commitlog", FILE_SIZE)
    log.queue.last_file_for_append(0).append(b"r" * 100)
    flusher = make_flusher(tmp_path)
    flusher.written_end = log.max_offset
    flusher._warm()
    assert flusher.warmer.enabled and flusher.warmer.warmed_to == FILE_SIZE
    assert (tmp_path / "commitlog" / SPARE_NAME).stat().st_size == FILE_SIZE
    assert flusher.warmer.spares_prepared == 1
    close(flusher)
    log.close()


def test_no_spare_work_while_a_group_commit_waits(tmp_path: Path) -> None:
    (tmp_path / "commitlog").mkdir()
    flusher = make_flusher(tmp_path)
    flusher.sync_wanted = True
    flusher._warm()
    assert not (tmp_path / "commitlog" / SPARE_PREPARING_NAME).exists()
    assert not (tmp_path / "commitlog" / SPARE_NAME).exists()
    close(flusher)


def test_spare_file_off_prepares_nothing(tmp_path: Path) -> None:
    (tmp_path / "commitlog").mkdir()
    flusher = make_flusher(tmp_path, spare=False)
    flusher._warm()
    assert os.listdir(tmp_path / "commitlog") == []
    close(flusher)


def test_a_skipped_spare_is_logged_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "commitlog").mkdir()
    flusher = make_flusher(tmp_path)

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    with caplog.at_level(logging.WARNING, logger="mqstore"):
        for _ in range(3):
            flusher._warm()
    assert [r.getMessage() for r in caplog.records if "spare" in r.getMessage()] == [
        "spare next file skipped: [Errno 28] No space left on device; "
        "the writer allocates the next commitlog file itself"]
    close(flusher)


def test_a_failed_directory_fsync_propagates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="Input/output error"):
        fsync_dir(tmp_path)


def test_a_new_files_name_is_made_durable_before_its_bytes_are_claimed(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    log = CommitLog.open(tmp_path / "commitlog", FILE_SIZE)
    first = log.queue.last_file_for_append(0)
    first.append(b"a" * 10)
    flusher = make_flusher(tmp_path)
    synced: list[int] = []
    monkeypatch.setattr("mqstore.actors.flusher.fsync_dir", lambda directory: synced.append(flusher.written_end))
    sent: list[Any] = []
    out: Any = SimpleNamespace(send_multipart=sent.append)
    flusher.sync_wanted = True
    for end in (10, 20, FILE_SIZE, FILE_SIZE + 10, FILE_SIZE + 20):
        if end == FILE_SIZE + 10:
            first.append(b"b" * (FILE_SIZE - first.written_pos))
            log.queue.last_file_for_append(0).append(b"c" * 10)
        flusher.written_end = end
        flusher.sync_wanted = True
        flusher._flush_commitlog(out, 0)
    assert synced == [10, FILE_SIZE + 10]  # the first flush, then the first byte claimed in the new file
    assert len(sent) == 5
    close(flusher)
    log.close()
