from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from mqstore.engine.log.mapped_file import MappedFile, MappedFileError, file_name
from mqstore.engine.log.mapped_file_queue import MappedFileQueue, infer_file_size

FILE_SIZE = 1024
HOUR_MS = 3_600_000
T0_S = 1_700_000_000


def append_everywhere(queue: MappedFileQueue, data: bytes, count: int) -> None:
    """RocketMQ's test loop: get the last file (rolling when full), append into it."""
    for _ in range(count):
        mf = queue.last_file_for_append(0)
        mf.append(data)


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- RocketMQ scenarios (reference §11.5 - §11.11) ------------------------------------------------


def test_get_last_mapped_file_rolls_when_full(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "a", FILE_SIZE)
    try:
        for i in range(1024):
            mf = queue.last_file_for_append(0)
            assert not mf.is_full
            assert mf.append(b"0123456789abcdef") == (i * 16) % FILE_SIZE
        assert len(queue.files) == 16
        assert queue.max_offset == 16 * FILE_SIZE
        assert names(tmp_path / "a") == [file_name(i * FILE_SIZE) for i in range(16)]
        assert all(len(n) == 20 for n in names(tmp_path / "a"))
    finally:
        queue.close()


def test_find_mapped_file_by_offset(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "b", FILE_SIZE)
    try:
        append_everywhere(queue, b"abcd", 1024)
        assert len(queue.files) * FILE_SIZE == 4096
        for offset, base in ((0, 0), (100, 0), (1024, 1024), (1124, 1024), (2048, 2048), (2148, 2048),
                             (3072, 3072), (4095, 3072)):
            mf = queue.find(offset)
            assert mf is not None and mf.file_base == base, offset
        assert queue.find(4096) is None
        assert queue.find(4196) is None
        assert queue.find(-1) is None
    finally:
        queue.close()


def test_find_when_the_first_file_starts_past_zero(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "c", FILE_SIZE)
    try:
        first = queue.last_file_for_append(1024)
        assert first.file_base == 1024
        first.append(b"x" * 10)
        found = queue.find(1025)
        assert found is first
        assert queue.find(0) is None
        assert queue.find(123) is None
        assert queue.find(0, return_first=True) is first
        assert queue.find(123, return_first=True) is first
        assert queue.min_offset == 1024 and queue.max_offset == 1034
    finally:
        queue.close()


def test_first_file_of_an_empty_queue_is_aligned_down(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "c", FILE_SIZE)
    try:
        assert queue.last_file_for_append(1500).file_base == 1024
        assert names(tmp_path / "c") == [file_name(1024)]
    finally:
        queue.close()


def test_each_flush_covers_one_file(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "d", FILE_SIZE)
    try:
        append_everywhere(queue, b"abcdefgh", 128 * 6 + 16)  # six full files and 128 bytes of a seventh
        assert queue.max_offset == 6 * FILE_SIZE + 128
        assert queue.flushed_where == 0
        progress = []
        for _ in range(9):
            before = queue.flushed_where
            after = queue.flush(0)
            if after == before:
                break
            progress.append(after)
        assert progress == [1024, 2048, 3072, 4096, 5120, 6144, 6144 + 128]
        assert all(mf.flushed_pos == mf.written_pos for mf in queue.files)
        append_everywhere(queue, b"abcdefgh", 300)  # into the 7th file and past it
        assert queue.flush_all() == queue.max_offset
    finally:
        queue.close()


def test_delete_expired_file_by_offset(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "e", 5120)
    try:
        for i in range(2048):  # 20-byte units whose first long is i: 256 per file, 8 files
            queue.last_file_for_append(0).append(struct.pack(">qiq", i, 0, 0))
        assert len(queue.files) == 8

        def last_unit(mf: MappedFile) -> int:
            return int(struct.unpack_from(">q", mf.buffer, mf.file_size - 20)[0])

        assert queue.delete_expired_by_offset(255, last_unit) == 0  # file 0 still holds unit 255
        assert queue.delete_expired_by_offset(768, last_unit) == 3  # last units 255, 511, 767
        assert queue.min_offset == 3 * 5120
        assert queue.delete_expired_by_offset(20480, last_unit) == 4
        assert len(queue.files) == 1  # never the last file
        assert queue.min_offset == 7 * 5120 > 0
        assert names(tmp_path / "e") == [file_name(7 * 5120)]
    finally:
        queue.close()


def test_delete_expired_file_by_offset_stops_at_the_first_keeper(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "e", 100)
    try:
        for value in (1, 9, 2, 3):  # one unit value per file; file 1 is a keeper
            mf = queue.last_file_for_append(0)
            mf.append(bytes(80) + struct.pack(">qiq", value, 0, 0))
        queue.last_file_for_append(0)
        deleted = queue.delete_expired_by_offset(
            5, lambda mf: int(struct.unpack_from(">q", mf.buffer, 80)[0]))
        assert deleted == 1
        assert queue.min_offset == 100
    finally:
        queue.close()


def age(mf: MappedFile, mtime_s: int) -> None:
    os.utime(mf.path, (mtime_s, mtime_s))


def test_delete_expired_file_by_time(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "f", FILE_SIZE)
    try:
        append_everywhere(queue, b"m" * 512, 100)
        assert len(queue.files) == 50
        for i, mf in enumerate(queue.files):
            age(mf, T0_S if i < 5 or i > 20 else T0_S + 10 * 3600)
        now_ms = (T0_S + 10 * 3600) * 1000
        assert queue.delete_expired_by_time(HOUR_MS, now_ms, batch_max=50) == 5
        assert len(queue.files) == 45
        assert queue.min_offset == 5 * FILE_SIZE
        assert len(names(tmp_path / "f")) == 45
    finally:
        queue.close()


def test_delete_expired_by_time_respects_batch_max_and_never_deletes_the_last(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "g", FILE_SIZE)
    try:
        append_everywhere(queue, b"m" * 512, 8)
        for mf in queue.files:
            age(mf, T0_S)
        now_ms = (T0_S + 10 * 3600) * 1000
        assert queue.delete_expired_by_time(HOUR_MS, now_ms, batch_max=2) == 2
        assert queue.delete_expired_by_time(HOUR_MS, now_ms, batch_max=10) == 1
        assert [mf.file_base for mf in queue.files] == [3 * FILE_SIZE]
        assert queue.delete_expired_by_time(HOUR_MS, now_ms, batch_max=10) == 0
    finally:
        queue.close()


def test_delete_expired_by_time_boundary_and_clean_immediately(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "h", FILE_SIZE)
    try:
        append_everywhere(queue, b"m" * 512, 8)
        for mf in queue.files:
            age(mf, T0_S)
        assert queue.delete_expired_by_time(HOUR_MS, T0_S * 1000 + HOUR_MS - 1) == 0
        assert queue.delete_expired_by_time(HOUR_MS, T0_S * 1000 + HOUR_MS, batch_max=1) == 1  # now >= mtime + expiry
        assert queue.delete_expired_by_time(HOUR_MS, T0_S * 1000, clean_immediately=True, batch_max=1) == 1
        kept = queue.files[0]
        assert queue.delete_expired_by_time(HOUR_MS, T0_S * 1000, clean_immediately=True,
                                            is_deletable=lambda mf: mf is not kept) == 0
        assert len(queue.files) == 2
    finally:
        queue.close()


def test_find_falls_back_to_iteration_when_the_list_is_out_of_order(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "i", FILE_SIZE)
    try:
        for i in range(3):
            mf = queue.last_file_for_append(FILE_SIZE * i)
            mf.set_positions(FILE_SIZE)
        found = queue.find(1028)
        assert found is not None and found.file_base == 1024
        queue.files[1], queue.files[2] = queue.files[2], queue.files[1]
        found = queue.find(1028)
        assert found is not None and found.file_base == 1024
    finally:
        queue.close()


# -- open -----------------------------------------------------------------------------------------


def filled_queue(directory: Path, files: int, tail_bytes: int = 0) -> None:
    queue = MappedFileQueue.open(directory, FILE_SIZE)
    for i in range(files * FILE_SIZE + tail_bytes):
        queue.last_file_for_append(0).append(bytes([i % 251 + 1]))
    queue.close()


def test_open_an_empty_or_missing_directory(tmp_path: Path) -> None:
    ro = MappedFileQueue.open(tmp_path / "missing", FILE_SIZE, writable=False)
    assert ro.files == [] and ro.min_offset == -1 and ro.max_offset == 0 and ro.last_file is None
    assert not (tmp_path / "missing").exists()
    queue = MappedFileQueue.open(tmp_path / "new", FILE_SIZE)
    assert (tmp_path / "new").is_dir() and queue.files == []
    assert queue.find(0) is None and queue.flush(0) == 0


def test_reopen_maps_every_file_with_cursors_at_the_end(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 3, 10)
    (tmp_path / "q" / "not-a-file-offset").write_text("ignored")
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE)
    try:
        assert [mf.file_base for mf in queue.files] == [0, 1024, 2048, 3072]
        assert queue.max_offset == 4 * FILE_SIZE  # like RocketMQ's load: recovery trims it
        assert queue.flushed_where == queue.max_offset
        assert bytes(queue.files[3].read(0, 11)) == bytes([(3072 + i) % 251 + 1 for i in range(10)]) + b"\x00"
    finally:
        queue.close()


def test_zero_length_last_file_is_removed_on_open(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 2)
    (tmp_path / "q" / file_name(2048)).touch()  # a crash between create and fallocate
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE)
    try:
        assert [mf.file_base for mf in queue.files] == [0, 1024]
        assert not (tmp_path / "q" / file_name(2048)).exists()
        assert queue.last_file_for_append(0).file_base == 2048
    finally:
        queue.close()


def test_zero_length_file_before_the_last_is_an_error(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 3)
    (tmp_path / "q" / file_name(1024)).write_bytes(b"")
    with pytest.raises(MappedFileError):
        MappedFileQueue.open(tmp_path / "q", FILE_SIZE)


def test_read_only_open_skips_a_zero_length_last_file(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 1)
    (tmp_path / "q" / file_name(1024)).touch()
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE, writable=False)
    try:
        assert [mf.file_base for mf in queue.files] == [0]
    finally:
        queue.close()
    assert (tmp_path / "q" / file_name(1024)).exists()  # a reader never deletes


def test_refresh_skips_a_file_its_writer_removed_after_the_listing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    filled_queue(tmp_path / "q", 1)
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE, writable=False)
    try:
        filled_queue(tmp_path / "q", 0, tail_bytes=1)  # the writer rolls to a second file ...
        real_open = MappedFile.open

        def removed_first(path: Path, *args: object, **kwargs: object) -> MappedFile:
            path.unlink()  # ... and removes it between the reader's listing and its open (full disk)
            return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(MappedFile, "open", removed_first)
        assert queue.refresh() is False
        assert [mf.file_base for mf in queue.files] == [0]
        monkeypatch.undo()
        filled_queue(tmp_path / "q", 0, tail_bytes=1)  # the writer makes it again once there is room
        assert queue.refresh() is True
        assert [mf.file_base for mf in queue.files] == [0, FILE_SIZE]
    finally:
        queue.close()


def test_wrong_size_file_is_an_error(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 2)
    with pytest.raises(MappedFileError):
        MappedFileQueue.open(tmp_path / "q", 2048)
    with open(tmp_path / "q" / file_name(1024), "ab") as f:
        f.write(b"x")
    with pytest.raises(MappedFileError):
        MappedFileQueue.open(tmp_path / "q", FILE_SIZE)


def test_a_gap_between_files_is_an_error(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 3)
    (tmp_path / "q" / file_name(1024)).unlink()
    with pytest.raises(MappedFileError):
        MappedFileQueue.open(tmp_path / "q", FILE_SIZE)


def test_infer_file_size(tmp_path: Path) -> None:
    assert infer_file_size(tmp_path / "none") is None
    filled_queue(tmp_path / "q", 1)
    assert infer_file_size(tmp_path / "q") == FILE_SIZE


# -- truncate_after -------------------------------------------------------------------------------


def test_truncate_after_cuts_one_file_and_deletes_the_later_ones(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 3, 500)
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE)
    original = b"".join((tmp_path / "q" / file_name(b)).read_bytes() for b in (0, 1024))
    queue.truncate_after(1024 + 300)
    assert [mf.file_base for mf in queue.files] == [0, 1024]
    assert queue.max_offset == 1324 and queue.flushed_where == 1324
    assert names(tmp_path / "q") == [file_name(0), file_name(1024)]
    queue.close()

    reopened = MappedFileQueue.open(tmp_path / "q", FILE_SIZE)
    try:
        assert os.stat(tmp_path / "q" / file_name(1024)).st_size == FILE_SIZE
        assert bytes(reopened.files[0].read(0, FILE_SIZE)) == original[:1024]
        assert bytes(reopened.files[1].read(0, FILE_SIZE)) == original[1024:1324] + bytes(724)
    finally:
        reopened.close()


def test_truncate_after_at_a_file_boundary_keeps_that_file_empty(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 3)
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE)
    try:
        queue.truncate_after(2048)
        assert [mf.file_base for mf in queue.files] == [0, 1024, 2048]
        assert queue.files[2].written_pos == 0 and queue.files[1].is_full
        assert bytes(queue.files[2].read(0, FILE_SIZE)) == bytes(FILE_SIZE)
        assert queue.max_offset == 2048
        assert queue.last_file_for_append(0).file_base == 2048
    finally:
        queue.close()


def test_truncate_after_beyond_the_written_end_changes_nothing(tmp_path: Path) -> None:
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE)
    try:
        append_everywhere(queue, b"z" * 100, 3)
        queue.truncate_after(500)
        assert queue.max_offset == 300
        assert bytes(queue.files[0].read(0, 300)) == b"z" * 300
    finally:
        queue.close()


def test_truncate_after_zero_empties_the_queue_but_the_first_file(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 2, 1)
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE)
    try:
        queue.truncate_after(0)
        assert [mf.file_base for mf in queue.files] == [0]
        assert queue.max_offset == 0 and queue.flushed_where == 0
        assert (tmp_path / "q" / file_name(0)).read_bytes() == bytes(FILE_SIZE)
    finally:
        queue.close()


def test_delete_all(tmp_path: Path) -> None:
    filled_queue(tmp_path / "q", 2)
    queue = MappedFileQueue.open(tmp_path / "q", FILE_SIZE)
    queue.delete_all()
    assert queue.files == [] and names(tmp_path / "q") == [] and queue.flushed_where == 0
