from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from mqstore.engine.log.mapped_file import OS_PAGE_SIZE, MappedFile, MappedFileError, file_name

SMALL = 1024
PAGES = 3 * OS_PAGE_SIZE


def test_file_name_is_the_20_digit_offset() -> None:
    assert file_name(0) == "00000000000000000000"
    assert file_name(1024) == "00000000000000001024"
    assert file_name(1_073_741_824) == "00000000001073741824"
    assert len(file_name(2**63 - 1)) == 20


def test_create_allocates_the_full_size_without_writing(tmp_path: Path) -> None:
    path = tmp_path / file_name(2048)
    mf = MappedFile.create(path, SMALL)
    try:
        assert mf.file_base == 2048 and mf.file_size == SMALL and mf.file_end == 3072
        assert (mf.written_pos, mf.committed_pos, mf.flushed_pos) == (0, 0, 0)
        assert mf.free_bytes == SMALL and not mf.is_full and mf.writable
        assert os.stat(path).st_size == SMALL
        assert path.read_bytes() == bytes(SMALL)
        assert bytes(mf.read(0, SMALL)) == bytes(SMALL)
    finally:
        mf.close()


def test_create_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    path.write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        MappedFile.create(path, SMALL)
    assert path.read_bytes() == b"keep me"


def test_append_moves_written_and_committed_not_flushed(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), SMALL)
    try:
        assert mf.append(b"abc") == 0
        assert mf.append(memoryview(b"defg")) == 3
        assert (mf.written_pos, mf.committed_pos, mf.flushed_pos) == (7, 7, 0)
        assert bytes(mf.read(0, 7)) == b"abcdefg"
        assert (tmp_path / file_name(0)).read_bytes()[:7] == b"abcdefg"  # same page cache
    finally:
        mf.close()


def test_append_past_the_end_raises_and_writes_nothing(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), SMALL)
    try:
        mf.append(b"x" * 1000)
        with pytest.raises(MappedFileError):
            mf.append(b"y" * 25)
        assert mf.written_pos == 1000
        assert bytes(mf.read(1000, 24)) == bytes(24)
        mf.append(b"y" * 24)
        assert mf.is_full and mf.free_bytes == 0
    finally:
        mf.close()


def test_append_blank_tail_fills_to_the_end(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), SMALL)
    try:
        mf.append(b"r" * 900)
        assert mf.append_blank_tail(b"HEADER!!") == 900
        assert mf.is_full and mf.committed_pos == SMALL
        assert bytes(mf.read(900, 124)) == b"HEADER!!" + bytes(116)
    finally:
        mf.close()


def test_contains_covers_the_file_range(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(1024), SMALL)
    try:
        assert [mf.contains(o) for o in (1023, 1024, 2047, 2048)] == [False, True, True, False]
    finally:
        mf.close()


def test_flush_moves_flushed_to_written(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), PAGES)
    try:
        assert mf.flush(0) == 0  # nothing written
        mf.append(b"a" * 100)
        assert mf.flush(0) == 100 and mf.flushed_pos == 100
        mf.append(b"b" * 100)
        assert mf.flush(0) == 200
        assert mf.flushed_pos <= mf.committed_pos <= mf.written_pos
    finally:
        mf.close()


def test_flush_with_least_pages_waits_for_enough_dirty_pages(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), PAGES)
    try:
        mf.append(b"a" * 100)
        assert mf.flush(1) == 0  # no page boundary crossed yet
        mf.append(b"b" * OS_PAGE_SIZE)  # written 4196: one whole page dirty
        assert mf.flush(2) == 0
        assert mf.flush(1) == 100 + OS_PAGE_SIZE
        mf.append(b"c" * (PAGES - mf.written_pos))  # a full file flushes whatever least_pages says
        assert mf.is_full
        assert mf.flush(100) == PAGES
    finally:
        mf.close()


def test_open_puts_every_cursor_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / file_name(4096)
    mf = MappedFile.create(path, SMALL)
    mf.append(b"hello")
    mf.flush()
    mf.close()
    reopened = MappedFile.open(path, SMALL)
    try:
        assert reopened.file_base == 4096
        assert (reopened.written_pos, reopened.committed_pos, reopened.flushed_pos) == (SMALL, SMALL, SMALL)
        assert bytes(reopened.read(0, 6)) == b"hello\x00"
        reopened.set_positions(5)
        assert (reopened.written_pos, reopened.committed_pos, reopened.flushed_pos) == (5, 5, 5)
        reopened.append(b"!")
        assert bytes(reopened.read(0, 6)) == b"hello!"
    finally:
        reopened.close()


@pytest.mark.parametrize("actual", [0, 1000, 1025, 2048])
def test_open_refuses_a_file_of_another_size(tmp_path: Path, actual: int) -> None:
    path = tmp_path / file_name(0)
    path.write_bytes(bytes(actual))
    with pytest.raises(MappedFileError):
        MappedFile.open(path, SMALL)


def test_read_only_open_cannot_write_or_truncate(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, SMALL)
    mf.append(b"data")
    mf.close()
    ro = MappedFile.open(path, SMALL, writable=False)
    try:
        assert not ro.writable
        assert bytes(ro.read(0, 4)) == b"data"
        with pytest.raises(TypeError):
            ro.buffer[0:1] = b"x"
        with pytest.raises(MappedFileError):
            ro.truncate_after(2)
    finally:
        ro.close()
    assert path.read_bytes()[:4] == b"data"


def test_close_is_idempotent_and_a_closed_file_has_no_buffer(tmp_path: Path) -> None:
    mf = MappedFile.create(tmp_path / file_name(0), SMALL)
    mf.close()
    mf.close()
    assert mf.closed
    with pytest.raises(MappedFileError):
        mf.append(b"x")


def test_delete_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, SMALL)
    mf.delete()
    assert mf.closed and not path.exists()


@pytest.mark.parametrize("cut", [0, 1, 100, OS_PAGE_SIZE - 1, OS_PAGE_SIZE, OS_PAGE_SIZE + 7, PAGES - 1, PAGES])
def test_truncate_after_zeroes_the_tail_and_keeps_the_size(tmp_path: Path, cut: int) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, PAGES)
    data = bytes((i * 7 + 1) % 251 + 1 for i in range(PAGES))  # no zero byte anywhere
    mf.append(data)
    mf.flush()
    mf.truncate_after(cut)
    assert (mf.written_pos, mf.committed_pos, mf.flushed_pos) == (cut, cut, cut)
    assert bytes(mf.read(0, PAGES)) == data[:cut] + bytes(PAGES - cut)
    if cut < PAGES:
        mf.append(b"\xff")  # appends go on from the cut
    mf.close()
    assert os.stat(path).st_size == PAGES
    on_disk = path.read_bytes()
    assert on_disk[:cut] == data[:cut]
    if cut < PAGES:
        assert on_disk[cut] == 0xFF
        assert on_disk[cut + 1:] == bytes(PAGES - cut - 1)
    reopened = MappedFile.open(path, PAGES)
    try:
        assert bytes(reopened.read(0, PAGES)) == on_disk
    finally:
        reopened.close()


def test_truncate_after_in_a_file_smaller_than_a_page(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, SMALL)
    mf.append(b"\x07" * SMALL)
    mf.truncate_after(300)
    mf.close()
    assert path.read_bytes() == b"\x07" * 300 + bytes(SMALL - 300)


def test_last_modified_follows_the_file_mtime(tmp_path: Path) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, SMALL)
    try:
        os.utime(path, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
        assert mf.last_modified_ms() == 1_600_000_000_123
    finally:
        mf.close()


def no_space(fd: int, offset: int, length: int) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_create_on_a_full_disk_raises_and_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "posix_fallocate", no_space)
    path = tmp_path / file_name(0)
    with pytest.raises(OSError) as info:
        MappedFile.create(path, SMALL)
    assert info.value.errno == errno.ENOSPC
    assert not path.exists()


def test_truncate_after_on_a_full_disk_keeps_the_file_openable(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / file_name(0)
    mf = MappedFile.create(path, PAGES)
    mf.append(b"\x05" * PAGES)
    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(OSError):
        mf.truncate_after(100)
    mf.close()
    monkeypatch.undo()
    assert os.stat(path).st_size == PAGES
    MappedFile.open(path, PAGES).close()
