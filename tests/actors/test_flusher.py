"""The flush service's durability rule: a failed fsync is an error that escapes (the process dies and
the supervisor restarts it), never something logged and ignored."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest

from mqstore.actors.file_syncer import FileSyncer


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
        assert os.fstat(syncer._fds[path].fd).st_ino == path.stat().st_ino
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


def _held_deleted(directory: Path) -> list[str]:
    """This process's descriptors of deleted files in ``directory``."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:
            continue
    return [link for link in links if link.startswith(str(directory)) and link.endswith("(deleted)")]


def test_deleted_files_are_held_open(tmp_path: Path) -> None:
    """A consume-queue or index file synced once and then deleted by retention is never asked for
    again: its descriptor (and a commitlog file's range mapping) goes at the next sweep, not when the
    same path is synced again, so its blocks are freed."""
    from mqstore.engine.log.open_files import OpenFiles

    queue_file, commitlog_file = tmp_path / "00000000000000000000", tmp_path / "00000000000000008192"
    queue_file.write_bytes(b"x" * 4096)
    commitlog_file.write_bytes(b"x" * 8192)
    open_files = OpenFiles()
    syncer = FileSyncer(open_files)
    try:
        assert syncer.fsync(queue_file)
        assert syncer.sync_range(commitlog_file, 8192, 0, 4096)  # not to its end: kept for the next flush
        queue_file.unlink()
        commitlog_file.unlink()
        assert len(_held_deleted(tmp_path)) == 2
        assert open_files.sweep() == 2
        assert _held_deleted(tmp_path) == []
        assert len(open_files) == 0 and not syncer._fds and not syncer._ranges
    finally:
        syncer.close()


def test_idle_descriptors_are_let_go_and_taken_again(tmp_path: Path) -> None:
    """The flush service holds descriptors only for the files it syncs now: one not synced between two
    sweeps is closed, and synced again through a new descriptor."""
    from mqstore.engine.log.open_files import OpenFiles

    paths = [tmp_path / f"{n:020d}" for n in range(4)]
    for path in paths:
        path.write_bytes(b"x")
    open_files = OpenFiles(max_open=2)
    syncer = FileSyncer(open_files)
    try:
        for path in paths:
            assert syncer.fsync(path)
        assert len(open_files) == 4  # each used in this round: none evicted under it
        open_files.sweep()
        assert syncer.fsync(paths[0])
        open_files.sweep()
        assert list(syncer._fds) == [paths[0]] and len(open_files) == 1
        assert syncer.fsync(paths[3])
    finally:
        syncer.close()
    assert len(open_files) == 0
