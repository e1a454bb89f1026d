"""Which files and directories a piece of code fsyncs, in order: ``os.fsync`` wrapped for a test, each
call noted by the path its descriptor names (``/proc/self/fd``) before the real fsync runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    synced: list[Path] = []
    real_fsync = os.fsync

    def noted(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", noted)
    return synced


def made_durable_before(synced: list[Path], name: Path, then: Path) -> bool:
    """Whether ``name``'s directory entry (its parent's fsync) was made durable before ``then`` was
    first fsynced after it."""
    parent = name.resolve().parent
    then = then.resolve()
    return parent in synced and then in synced[synced.index(parent):]
