"""``mqstore.engine.log.range_sync``: a byte range of a file made durable through a read-only mapping."""

import errno
import os
from pathlib import Path

import pytest

from mqstore.engine.log import range_sync
from mqstore.engine.log.range_sync import RangeSync


def test_ranges_are_synced_and_clamped_to_the_mapping(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\0" * 3 * 4096)
    ranged = RangeSync(path, 3 * 4096)
    try:
        ranged.sync(100, 5000)      # from the page that holds byte 100
        ranged.sync(5000, 5000)     # empty: nothing to do
        ranged.sync(8000, 1 << 20)  # past the mapping: up to its end
    finally:
        ranged.close()
    ranged.close()  # twice is harmless
    assert ranged.fd == -1


def test_a_missing_file_raises_and_leaves_nothing_open(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(FileNotFoundError):
        RangeSync(tmp_path / "absent", 4096)
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_refused_msync_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\0" * 4096)
    ranged = RangeSync(path, 4096)
    try:
        def refused(address: int, length: int, flags: int) -> int:
            range_sync.ctypes.set_errno(errno.EIO)
            return -1

        monkeypatch.setattr(range_sync, "_msync", refused)
        with pytest.raises(OSError, match="msync: Input/output error"):
            ranged.sync(0, 10)
    finally:
        monkeypatch.undo()
        ranged.close()
