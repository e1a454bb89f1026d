"""Index file names: local creation time, bumped past a taken or newer name, listed oldest first."""

from __future__ import annotations

import time
from pathlib import Path

from mqstore.engine.keyindex.file_names import (
    index_file_name,
    index_file_names,
    next_index_file_name,
    remove_unfinished,
)

T0 = 1_700_000_000_000


def test_file_name_is_local_time() -> None:
    seconds = T0 // 1000
    assert index_file_name(T0 + 7) == time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + "007"


def test_next_name_passes_taken_and_newer_names(tmp_path: Path) -> None:
    name = index_file_name(T0)
    assert next_index_file_name(tmp_path, T0, "") == name
    (tmp_path / name).touch()
    assert next_index_file_name(tmp_path, T0, "") == index_file_name(T0 + 1)
    later = index_file_name(T0 + 3_600_000)
    assert next_index_file_name(tmp_path, T0, later) == index_file_name(T0 + 3_600_001)  # the clock went back


def test_listing_keeps_index_names_and_drops_unfinished_creations(tmp_path: Path) -> None:
    names = [index_file_name(T0 + i) for i in (2, 0, 1)]
    for name in [*names, "notes.txt", f"{index_file_name(T0 + 5)}.tmp"]:
        (tmp_path / name).touch()
    (tmp_path / index_file_name(T0 + 9)).mkdir()
    assert index_file_names(tmp_path) == sorted(names)
    remove_unfinished(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, "notes.txt", index_file_name(T0 + 9)])
    assert index_file_names(tmp_path / "missing") == []
