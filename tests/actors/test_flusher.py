"""The flush service's durability rule: a failed fsync is an error that escapes (the process dies and
the supervisor restarts it), never something logged and ignored."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from actors.flusher import FileSyncer


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
