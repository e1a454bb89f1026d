"""Names that must survive a power cut: ``make_dirs`` fsyncs the parent of every directory it makes,
and ``DirectorySync`` fsyncs a directory (and the ones above it up to its root) once per change made
in it, not on every call."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore.engine.meta.metafile import DIR_TIME_TRUST_NS, DirectorySync, make_dirs
from tests.fsyncs import record_fsyncs


def _age(directory: Path) -> None:
    """Set the directory's times past the window in which a coarse clock could repeat them."""
    old_ns = directory.stat().st_mtime_ns - 2 * DIR_TIME_TRUST_NS
    os.utime(directory, ns=(old_ns, old_ns))


def test_make_dirs_makes_every_new_name_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced = record_fsyncs(monkeypatch)
    make_dirs(tmp_path / "a" / "b" / "c")
    assert synced == [tmp_path, tmp_path / "a", tmp_path / "a" / "b"]
    synced.clear()
    make_dirs(tmp_path / "a" / "b")
    assert synced == []  # nothing made, nothing synced


def test_a_directory_is_synced_once_per_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    queue_dir = tmp_path / "consumequeue" / "T" / "0"
    queue_dir.mkdir(parents=True)
    (queue_dir / "00000000000000000000").write_bytes(b"x")
    dirs = DirectorySync(tmp_path)
    synced = record_fsyncs(monkeypatch)
    assert dirs.sync(queue_dir)
    assert set(synced) == {queue_dir, queue_dir.parent, queue_dir.parent.parent, tmp_path}
    for directory in (queue_dir, queue_dir.parent, queue_dir.parent.parent, tmp_path):
        _age(directory)
    dirs = DirectorySync(tmp_path)
    dirs.sync(queue_dir)
    synced.clear()
    dirs.sync(queue_dir)
    assert synced == []  # unchanged since its fsync
    (queue_dir / "00000000000000000020").write_bytes(b"y")
    dirs.sync(queue_dir)
    assert synced == [queue_dir]  # a new file: its directory, not the ones above (unchanged)


def test_a_directory_made_again_has_its_name_synced_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = tmp_path / "T"
    (topic / "0").mkdir(parents=True)
    dirs = DirectorySync(tmp_path)
    dirs.sync(topic / "0")
    for directory in (topic / "0", topic, tmp_path):
        _age(directory)
    dirs = DirectorySync(tmp_path)
    dirs.sync(topic / "0")
    synced = record_fsyncs(monkeypatch)
    (topic / "0").rmdir()
    topic.rmdir()
    (topic / "0").mkdir(parents=True)
    dirs.sync(topic / "0")
    assert synced == [tmp_path, topic, topic / "0"]
    assert not dirs.sync(tmp_path / "gone")


def test_a_recent_change_is_synced_again_until_its_time_can_be_trusted(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = DirectorySync(tmp_path)
    synced = record_fsyncs(monkeypatch)
    dirs.sync(tmp_path)
    dirs.sync(tmp_path)  # changed within the window: a change in the same clock tick could hide
    assert synced == [tmp_path, tmp_path]
