"""The flush service's durability rule: a failed fsync is an error that escapes (the process dies and
the supervisor restarts it), never something logged and ignored."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest

from mqstore.actors.flusher import FileSyncer


def test_failed_fsync_propagates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "00000000000000000000"
    path.write_bytes(b"x" * 4096)
    syncer = FileSyncer()
    try:
        assert syncer.fsync(path) is True

        def broken(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", broken)
        with pytest.raises(OSError, match="Input/output error"):
            syncer.fsync(path)
    finally:
        monkeypatch.undo()
        syncer.close()


def test_a_file_not_there_yet_is_not_an_error(tmp_path: Path) -> None:
    syncer = FileSyncer()
    assert syncer.fsync(tmp_path / "missing") is False
    syncer.close()


def test_a_file_deleted_and_made_again_is_synced_through_the_new_file(tmp_path: Path) -> None:
    """A deleted topic made again reuses its queues' file names: a descriptor kept for the old file
    synced the unlinked one and never the new file."""
    path = tmp_path / "00000000000000000000"
    path.write_bytes(b"old")
    syncer = FileSyncer()
    try:
        assert syncer.fsync(path)
        path.unlink()
        assert syncer.fsync(path) is False  # gone, and its descriptor with it
        path.write_bytes(b"new")
        assert syncer.fsync(path)
        assert os.fstat(syncer._fds[path]).st_ino == path.stat().st_ino
    finally:
        syncer.close()


def test_a_range_is_synced_and_a_failed_msync_propagates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commitlog's flush (``sync_range``: msync of the bytes written since the last flush) raises
    like fsync when the kernel refuses, and a file retention deleted is skipped."""
    from mqstore.engine.log import range_sync

    path = tmp_path / "00000000000000000000"
    path.write_bytes(b"x" * 16384)
    syncer = FileSyncer()
    try:
        assert syncer.sync_range(path, 16384, 100, 9000) is True
        assert syncer.sync_range(path, 16384, 9000, 9000) is True  # nothing new: nothing to do
        assert syncer.sync_range(tmp_path / "00000000000000016384", 16384, 0, 10) is False

        def refused(address: int, length: int, flags: int) -> int:
            ctypes.set_errno(errno.EIO)
            return -1

        monkeypatch.setattr(range_sync, "_msync", refused)
        with pytest.raises(OSError, match="msync"):
            syncer.sync_range(path, 16384, 9000, 12000)
    finally:
        monkeypatch.undo()
        syncer.close()


def test_a_range_of_a_file_deleted_and_made_again_is_synced_through_the_new_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000"
    path.write_bytes(b"x" * 16384)
    syncer = FileSyncer()
    try:
        assert syncer.sync_range(path, 16384, 0, 4096) is True
        path.unlink()
        path.write_bytes(b"y" * 16384)
        assert syncer.sync_range(path, 16384, 0, 8192) is True
        assert os.fstat(syncer._ranges[path].fd).st_ino == path.stat().st_ino
    finally:
        syncer.close()


def test_a_file_synced_to_its_end_is_let_go(tmp_path: Path) -> None:
    """A commitlog file full and durable is never written again: its mapping and descriptor go, so
    retention's delete frees its space."""
    path = tmp_path / "00000000000000000000"
    path.write_bytes(b"x" * 8192)
    syncer = FileSyncer()
    try:
        assert syncer.sync_range(path, 8192, 0, 4096) is True
        assert path in syncer._ranges
        assert syncer.sync_range(path, 8192, 4096, 8192) is True
        assert path not in syncer._ranges
    finally:
        syncer.close()
