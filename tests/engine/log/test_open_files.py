"""A process's bounded set of open store files (``mqstore.engine.log.open_files``) over real mapped
files: what is idle or deleted is let go at a sweep, what a view borrows stays, a file let go maps
again on its next use with its bytes and cursors, and a queue forgets its leading deleted files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from mqstore.engine.log.mapped_file import MappedFileError
from mqstore.engine.log.mapped_file_queue import MappedFileQueue
from mqstore.engine.log.open_files import OpenFiles

FILE_SIZE = 4096


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


def _queue(tmp_path: Path, open_files: OpenFiles, files: int) -> MappedFileQueue:
    queue = MappedFileQueue.open(tmp_path, FILE_SIZE, open_files=open_files)
    for n in range(files):
        queue.last_file_for_append(queue.max_offset).append(bytes([n + 1]) * FILE_SIZE)
    return queue


def test_store_files_held_stay_bounded_as_the_store_grows(tmp_path: Path) -> None:
    open_files = OpenFiles(max_open=3)
    queue = _queue(tmp_path, open_files, 12)
    try:
        open_files.sweep()  # the round that wrote them is over: now they are idle
        for mf in queue.files[:6]:
            assert mf.read(0, 1) == bytes([mf.file_base // FILE_SIZE + 1])  # mapped again, bytes intact
        open_files.sweep()
        for mf in queue.files[6:]:
            mf.read(0, 1)  # over the bound: the idle ones go as these are mapped
        assert len(open_files) <= 3 + 6
        open_files.sweep()
        open_files.sweep()
        assert len(open_files) == 0 and _held(tmp_path) == []
        assert queue.files[-1].written_pos == FILE_SIZE  # cursors are the object's, not the mapping's
    finally:
        queue.close()
    assert len(open_files) == 0


def test_a_borrowed_mapping_stays_until_its_view_is_released(tmp_path: Path) -> None:
    open_files = OpenFiles(max_open=1)
    queue = _queue(tmp_path, open_files, 2)
    try:
        first = queue.files[0]
        view = np.frombuffer(first.buffer, dtype=np.uint8)
        open_files.sweep()
        open_files.sweep()
        assert first.mapped and int(view[0]) == 1
        del view
        open_files.sweep()
        assert not first.mapped and len(open_files) == 0
    finally:
        queue.close()


def test_deleted_files_are_held_open(tmp_path: Path) -> None:
    """Another process's retention deletes the leading files: a sweep unmaps them and the queue
    forgets them, though they were in use and nothing listed the directory again."""
    open_files = OpenFiles()
    writer = _queue(tmp_path, open_files, 4)
    reader = MappedFileQueue.open(tmp_path, FILE_SIZE, writable=False, open_files=open_files)
    try:
        for mf in reader.files:
            mf.read(0, 1)
        for mf in writer.files[:2]:
            mf.delete()
        del writer.files[:2]
        assert any(name.endswith("(deleted)") for name in _held(tmp_path))
        open_files.sweep()
        assert not any(name.endswith("(deleted)") for name in _held(tmp_path))
        assert reader.min_offset == 2 * FILE_SIZE
    finally:
        reader.close()
        writer.close()


def test_a_file_deleted_while_let_go_is_never_mapped_again(tmp_path: Path) -> None:
    open_files = OpenFiles()
    queue = _queue(tmp_path, open_files, 1)
    try:
        mf = queue.files[0]
        open_files.sweep()
        open_files.sweep()
        mf.path.unlink()
        with pytest.raises(MappedFileError, match="deleted"):
            mf.read(0, 1)
        assert mf.gone
    finally:
        queue.close()


def test_a_file_let_go_deleted_and_made_again_under_its_inode_is_not_taken_for_it(tmp_path: Path) -> None:
    """ext4 gives a new file the inode number of one just freed, at the same path too: a file let go,
    deleted and made again is a new file (``replaced``, and its next use fails), though the path's
    inode number is the one it had."""
    open_files = OpenFiles()
    queue = _queue(tmp_path, open_files, 1)
    try:
        mf = queue.files[0]
        open_files.sweep()
        open_files.sweep()
        assert not mf.mapped
        inode = mf.path.stat().st_ino
        for _ in range(8):  # made again until the number is reused (at once, every time, on ext4)
            mf.path.unlink()
            mf.path.write_bytes(b"\xee" * FILE_SIZE)
            if mf.path.stat().st_ino == inode:
                break
        else:
            pytest.skip("this filesystem gave the new file another inode number")
        assert mf.replaced() and mf.deleted()
        with pytest.raises(MappedFileError, match="deleted"):
            mf.read(0, 1)
    finally:
        queue.close()
