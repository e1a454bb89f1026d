"""WriterPrefault on a real file: the range ahead of the written end is mapped into this process's
page tables (the mapping's Rss in /proc/self/smaps grows), and not one byte of the file changes."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

from mqstore.engine.log.mapped_file import OS_PAGE_SIZE, MappedFile, file_name
from mqstore.engine.log.prefault import WriterPrefault

FILE_SIZE = 4 * 1024 * 1024


def mapping_rss_bytes(mm: mmap.mmap) -> int:
    """Rss of the one mapping starting at ``mm``'s address, from /proc/self/smaps."""
    view = ctypes.c_char.from_buffer(mm)
    start = ctypes.addressof(view)
    del view
    rss_kib = None
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            inside = int(head.split("-")[0], 16) == start
        elif inside and head == "Rss:":
            rss_kib = int(line.split()[1])
    assert rss_kib is not None, "the mapping is not in /proc/self/smaps"
    return rss_kib * 1024


def file_bytes(path: Path) -> bytes:
    return path.read_bytes()


def new_file(tmp_path: Path, head: bytes) -> MappedFile:
    mf = MappedFile.create(tmp_path / file_name(0), FILE_SIZE)
    mf.append(head)
    return mf


def test_populate_maps_the_range_ahead_into_this_process_and_writes_nothing(tmp_path: Path) -> None:
    head = b"record" * 1000
    mf = new_file(tmp_path, head)
    try:
        before = file_bytes(mf.path)
        rss_before = mapping_rss_bytes(mf.buffer)
        prefault = WriterPrefault(1024 * 1024, step_bytes=256 * 1024)
        assert prefault.due(mf, mf.written_pos)
        advised = 0
        while (n := prefault.step(mf, mf.written_pos)) > 0:
            advised += n
        assert prefault.error is None and prefault.enabled
        assert prefault.populated_pos == prefault.target_pos(mf, mf.written_pos)
        assert advised >= 1024 * 1024
        assert mapping_rss_bytes(mf.buffer) - rss_before >= 1024 * 1024
        assert not prefault.due(mf, mf.written_pos)
        assert file_bytes(mf.path) == before
        assert before[:len(head)] == head and before.count(0) == FILE_SIZE - len(head)
    finally:
        mf.close()


def test_unaligned_written_end_keeps_every_step_page_aligned(tmp_path: Path) -> None:
    """Regression: the populated end was written end + ahead, unaligned after an unaligned written
    end, and the next madvise from there failed with EINVAL and turned populating off for good."""
    mf = new_file(tmp_path, b"x" * 5001)
    try:
        prefault = WriterPrefault(100_000 + 7, step_bytes=64 * 1024)
        for _ in range(20):
            while prefault.step(mf, mf.written_pos) > 0:
                assert prefault.populated_pos % OS_PAGE_SIZE == 0
            mf.append(b"y" * 30_001)
        assert prefault.enabled and prefault.error is None
        assert prefault.populated_bytes > 20 * 30_000
    finally:
        mf.close()


def test_stops_at_the_file_end_and_follows_a_new_file(tmp_path: Path) -> None:
    mf = new_file(tmp_path, b"z" * (FILE_SIZE - 10_000))
    other = MappedFile.create(tmp_path / file_name(FILE_SIZE), FILE_SIZE)
    try:
        prefault = WriterPrefault(1024 * 1024)
        while prefault.step(mf, mf.written_pos) > 0:
            pass
        assert prefault.populated_pos == FILE_SIZE
        assert prefault.due(other, 0)
        assert prefault.step(other, 0) > 0 and prefault.file is other
        assert file_bytes(other.path).count(0) == FILE_SIZE
    finally:
        mf.close()
        other.close()


def test_refused_advice_turns_populating_off_with_the_reason(tmp_path: Path) -> None:
    mf = new_file(tmp_path, b"a" * 100)
    try:
        before = file_bytes(mf.path)
        prefault = WriterPrefault(1024 * 1024, advice=9999)  # no such advice: EINVAL, as before Linux 5.14
        assert prefault.step(mf, mf.written_pos) == 0
        assert not prefault.enabled and prefault.error is not None and os.strerror(22) in prefault.error
        assert not prefault.due(mf, mf.written_pos)
        assert file_bytes(mf.path) == before
    finally:
        mf.close()


def test_off_and_closed_files_do_nothing(tmp_path: Path) -> None:
    mf = new_file(tmp_path, b"b" * 100)
    off = WriterPrefault(0)
    assert not off.enabled and off.error is None
    assert not off.due(mf, mf.written_pos) and off.step(mf, mf.written_pos) == 0
    mf.close()
    assert WriterPrefault(1024 * 1024).step(mf, 100) == 0
