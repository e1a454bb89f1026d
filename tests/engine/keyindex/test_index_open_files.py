"""Index files through a process's bounded set of open files (``mqstore.engine.keyindex.index_map``):
the index builder's and a reader's files are let go when idle, mapped again with their entries on
the next query or put, kept while a view borrows them, and a file retention deleted is let go at the
next sweep, forgotten by the reader, and passed over by a query that reaches it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from mqstore.engine.keyindex.index_file import IndexFile, IndexFileGoneError
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.open_files import OpenFiles

T0 = 1_700_000_000_000
LONG_MAX = 2**63 - 1
FILES = 6


class Clock:
    def __init__(self) -> None:
        self.now_ms = T0

    def __call__(self) -> int:
        self.now_ms += 1  # a new file a millisecond later than the last: names never collide
        return self.now_ms


def _held(directory: Path) -> list[str]:
    """This process's descriptors and mappings of files in ``directory``, as the kernel names them."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:
            continue
    with open("/proc/self/maps") as maps:
        names += [line.split(maxsplit=5)[5].strip() for line in maps if len(line.split()) == 6]
    return [name for name in names if name.startswith(str(directory))]


def _builder(tmp_path: Path, open_files: OpenFiles) -> IndexService:
    """An index of ``FILES`` files of 3 keys each, key ``k{n}`` at offset ``100 * n``."""
    builder = IndexService.open(tmp_path, 3, 4, Clock(), open_files=open_files)
    for n in range(3 * FILES):
        builder.build("T", [f"k{n}"], None, 100 * n, T0 + n, 0)
    builder.flush()
    assert len(builder.files) == FILES
    return builder


def _offsets(index: IndexService, key: str) -> list[int]:
    return index.query("T", key, 64, 0, LONG_MAX).phys_offsets


def test_index_files_held_stay_bounded_and_map_again_with_their_entries(tmp_path: Path) -> None:
    open_files = OpenFiles(max_open=2)
    builder = _builder(tmp_path, open_files)
    reader = IndexService.open(tmp_path, 3, 4, Clock(), writable=False, open_files=open_files)
    try:
        open_files.sweep()
        open_files.sweep()
        assert len(open_files) == 0 and _held(tmp_path) == []
        assert [_offsets(reader, f"k{n}") for n in range(3 * FILES)] == [[100 * n] for n in range(3 * FILES)]
        open_files.sweep()
        open_files.sweep()
        assert len(open_files) == 0
        builder.build("T", ["later"], None, 100 * 3 * FILES, T0 + 3 * FILES, 0)  # maps the newest again to roll
        reader.refresh()
        assert _offsets(reader, "later") == [100 * 3 * FILES] and len(reader.files) == FILES + 1
    finally:
        reader.close()
        builder.close()
    assert len(open_files) == 0 and _held(tmp_path) == []


def test_a_borrowed_index_mapping_stays_until_its_view_is_released(tmp_path: Path) -> None:
    open_files = OpenFiles()
    builder = _builder(tmp_path, open_files)
    try:
        first = builder.files[0]
        view = np.frombuffer(first.held.mapping() or b"", np.uint8)
        open_files.sweep()
        open_files.sweep()
        assert first.held.mapped and len(view) > 0
        del view
        open_files.sweep()
        assert not first.held.mapped and first.end_phys_offset == 200  # mapped again to read it
    finally:
        builder.close()


def test_deleted_index_files_are_held_open(tmp_path: Path) -> None:
    """The builder's retention deletes the oldest files a reader has queried through: the reader's
    next sweep unmaps them and it forgets them, though nothing listed the directory again."""
    builder = _builder(tmp_path, OpenFiles())
    open_files = OpenFiles()
    reader = IndexService.open(tmp_path, 3, 4, Clock(), writable=False, open_files=open_files)
    try:
        assert _offsets(reader, "k0") == [0]  # the walk maps every file
        assert builder.delete_before(100 * 6) == 2
        assert any(name.endswith("(deleted)") for name in _held(tmp_path))
        open_files.sweep()
        assert not any(name.endswith("(deleted)") for name in _held(tmp_path))
        assert [f.name for f in reader.files] == [f.name for f in builder.files]
    finally:
        reader.close()
        builder.close()


def test_a_query_passes_over_a_file_deleted_while_let_go(tmp_path: Path) -> None:
    builder = _builder(tmp_path, OpenFiles())
    open_files = OpenFiles()
    reader = IndexService.open(tmp_path, 3, 4, Clock(), writable=False, open_files=open_files)
    try:
        gone = reader.files[0]
        assert builder.delete_before(100 * 3) == 1
        assert _offsets(reader, "k0") == [] and _offsets(reader, "k3") == [300]
        assert gone.held.gone
        with pytest.raises(IndexFileGoneError):
            _ = gone.end_phys_offset
    finally:
        reader.close()
        builder.close()


def test_an_index_file_let_go_deleted_and_made_again_under_its_inode_is_not_taken_for_it(tmp_path: Path) -> None:
    open_files = OpenFiles()
    path = tmp_path / "f"
    index_file = IndexFile.create(path, 3, 4, open_files=open_files)
    try:
        index_file.put_key("k", 100, T0)
        open_files.sweep()
        open_files.sweep()
        assert not index_file.held.mapped
        inode = path.stat().st_ino
        size = path.stat().st_size
        for _ in range(8):  # made again until the number is reused (at once, every time, on ext4)
            path.unlink()
            path.write_bytes(bytes(size))
            if path.stat().st_ino == inode:
                break
        else:
            pytest.skip("this filesystem gave the new file another inode number")
        assert index_file.held.deleted()
        assert index_file.select_phys_offsets("k", 1, 0, LONG_MAX) == []
        with pytest.raises(IndexFileGoneError):
            index_file.put_key("k2", 200, T0)
    finally:
        index_file.close()
