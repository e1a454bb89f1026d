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
