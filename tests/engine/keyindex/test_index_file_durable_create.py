"""A new index file's bytes are durable before its name: a power cut after any directory sync (the
file's own, or a later one's) must never leave the name of a file that reads 0 bytes long, which
``IndexFile.open`` refuses and with it the whole store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore.engine.keyindex.index_file import IndexFile


def test_a_new_index_file_is_fsynced_before_it_is_renamed_into_place(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("rename", os.fspath(src)))
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    path = tmp_path / "20240101000000000"
    with IndexFile.create(path, 8, 16, begin_phys_offset=4096, begin_ms=1_700_000_000_000):
        pass
    tmp = os.fspath(path) + ".tmp"
    assert ("rename", tmp) in events
    assert ("fsync", tmp) in events[:events.index(("rename", tmp))]
    with IndexFile.open(path, 8, 16) as reopened:
        assert reopened.begin_phys_offset == 4096
