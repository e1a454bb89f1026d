"""The spare next commitlog file: prepared by the page warmer under a dot name, adopted by the
writer's roll with a rename, ignored by every listing of the log until then, and never a danger when
left behind by a crash or a full disk."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from mqstore.engine import Message, MessageStore, StoreConfig
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file_queue import SPARE_NAME, SPARE_PREPARING_NAME, MappedFileQueue, infer_file_size
from mqstore.engine.log.page_warmer import PageWarmer
from mqstore.engine.log.record import encode_blank
from mqstore.engine.meta.metafile import create_abort
from mqstore.engine.read.store_files import read_geometry
from mqstore.engine.repair.verify import verify_store
from mqstore.pipeline.commitlog_ranges import commitlog_files
from mqstore.pipeline.queues import commitlog_files as listed_commitlog_files
from tests.conftest import TINY, FakeClock

FILE_SIZE = 64 * 1024


def ready_spare(warmer: PageWarmer, written_end: int = 0) -> int:
    """Step the warmer until its spare is ready; returns the spare's inode."""
    for _ in range(1000):
        if (warmer.directory / SPARE_NAME).exists():
            return (warmer.directory / SPARE_NAME).stat().st_ino
        warmer.prepare_spare(written_end)
    raise AssertionError(f"no spare: {warmer.spare_error}")


def fill(mf_queue: MappedFileQueue) -> None:
    mf = mf_queue.last_file_for_append(0)
    mf.append(b"x" * (mf.free_bytes - 8))
    mf.append_blank_tail(b"\0" * 8)


def test_a_roll_adopts_the_ready_spare(tmp_path: Path) -> None:
    directory = tmp_path / "commitlog"
    log = CommitLog.open(directory, FILE_SIZE)
    log.queue.adopt_spares = True
    fill(log.queue)
    warmer = PageWarmer(directory, FILE_SIZE, ahead_bytes=16 * 1024, step_bytes=4096, spare=True)
    inode = ready_spare(warmer, log.max_offset)
    assert warmer.spares_prepared == 1 and not (directory / SPARE_PREPARING_NAME).exists()
    assert log.max_offset == FILE_SIZE  # a ready spare moves nothing
    nxt = log.queue.last_file_for_append(0)
    assert (nxt.file_base, nxt.written_pos, nxt.path.stat().st_ino) == (FILE_SIZE, 0, inode)
    assert log.queue.spares_adopted == 1 and not (directory / SPARE_NAME).exists()
    nxt.append(b"after the roll")
    assert log.max_offset == FILE_SIZE + len(b"after the roll")
    assert bytes(nxt.buffer[len(b"after the roll"):]) == bytes(FILE_SIZE - len(b"after the roll"))
    log.close()
    warmer.close()
    again = MappedFileQueue.open(directory, FILE_SIZE)
    assert [mf.file_base for mf in again.files] == [0, FILE_SIZE]
    assert again.files[1].read(0, 14) == b"after the roll"
    again.close()


def test_without_a_ready_spare_the_roll_allocates_inline(tmp_path: Path) -> None:
    directory = tmp_path / "commitlog"
    queue = MappedFileQueue.open(directory, FILE_SIZE)
    queue.adopt_spares = True
    fill(queue)
    (directory / SPARE_PREPARING_NAME).write_bytes(bytes(FILE_SIZE))  # not ready: never taken
    nxt = queue.last_file_for_append(0)
    assert (nxt.file_base, nxt.written_pos, queue.spares_adopted) == (FILE_SIZE, 0, 0)
    assert (directory / SPARE_PREPARING_NAME).exists()
    queue.close()


def test_a_spare_of_another_size_is_never_adopted(tmp_path: Path) -> None:
    directory = tmp_path / "commitlog"
    queue = MappedFileQueue.open(directory, FILE_SIZE)
    queue.adopt_spares = True
    (directory / SPARE_NAME).write_bytes(b"\1" * 4096)
    first = queue.last_file_for_append(0)
    assert (first.file_base, queue.spares_adopted) == (0, 0)
    assert first.path.stat().st_size == FILE_SIZE and bytes(first.buffer[:4096]) == bytes(4096)
    assert not (directory / SPARE_NAME).exists()
    queue.close()


def test_queues_that_do_not_adopt_leave_the_spare_alone(tmp_path: Path) -> None:
    directory = tmp_path / "commitlog"
    log = CommitLog.open(directory, FILE_SIZE)
    warmer = PageWarmer(directory, FILE_SIZE, spare=True)
    ready_spare(warmer)
    log.queue.last_file_for_append(0)
    assert (directory / SPARE_NAME).exists() and log.queue.spares_adopted == 0
    warmer.close()
    log.close()


def test_every_listing_of_the_log_ignores_the_spares(tmp_path: Path) -> None:
    directory = tmp_path / "commitlog"
    directory.mkdir()
    (directory / SPARE_NAME).write_bytes(bytes(FILE_SIZE))
    (directory / SPARE_PREPARING_NAME).write_bytes(bytes(100))
    assert infer_file_size(directory) is None
    assert read_geometry(tmp_path).commitlog_file_size != FILE_SIZE  # the defaults: no log file here
    for writable in (True, False):
        queue = MappedFileQueue.open(directory, FILE_SIZE, writable=writable)
        assert (queue.files, queue.max_offset) == ([], 0)
        queue.close()
    log = CommitLog.open(directory, FILE_SIZE)
    log.queue.last_file_for_append(0).append(b"data")
    reader = MappedFileQueue.open(directory, FILE_SIZE, writable=False)
    (directory / SPARE_NAME).write_bytes(bytes(FILE_SIZE))  # made ready after the reader listed
    assert not reader.refresh() and [mf.file_base for mf in reader.files] == [0]
    assert infer_file_size(directory) == FILE_SIZE
    reader.close()
    log.close()


def test_the_pipeline_and_verify_ignore_the_spares(tmp_path: Path) -> None:
    clock = FakeClock()
    store_dir = tmp_path / "s"
    with MessageStore.open(store_dir, StoreConfig(geometry=TINY), now_ms=clock) as store:
        for i in range(40):
            store.put(Message("Orders", b"body-%d" % i * 20, keys=[f"k{i}"]))
    files = [f.file_base for f in commitlog_files(store_dir, TINY)]
    listed = [f.file_base for f in listed_commitlog_files(store_dir, TINY.commitlog_file_size)]
    directory = store_dir / "commitlog"
    (directory / SPARE_NAME).write_bytes(bytes(TINY.commitlog_file_size))
    (directory / SPARE_PREPARING_NAME).write_bytes(bytes(10))
    assert [f.file_base for f in commitlog_files(store_dir, TINY)] == files
    assert [f.file_base for f in listed_commitlog_files(store_dir, TINY.commitlog_file_size)] == listed == files
    assert verify_store(store_dir).ok


def test_leftovers_of_a_killed_preparer(tmp_path: Path) -> None:
    """A half-made spare goes when the next preparer starts; a ready one of the right size stays for
    the writer, one of another size goes."""
    directory = tmp_path / "commitlog"
    directory.mkdir()
    (directory / SPARE_PREPARING_NAME).write_bytes(bytes(100))
    (directory / SPARE_NAME).write_bytes(bytes(FILE_SIZE))
    warmer = PageWarmer(directory, FILE_SIZE, spare=True)
    assert not (directory / SPARE_PREPARING_NAME).exists() and (directory / SPARE_NAME).exists()
    assert warmer.prepare_spare(0) == 0  # already ready
    warmer.close()
    (directory / SPARE_NAME).write_bytes(bytes(FILE_SIZE // 2))
    PageWarmer(directory, FILE_SIZE, spare=True).close()
    assert not (directory / SPARE_NAME).exists()


def test_a_preparer_stopped_midway_removes_its_half_made_spare(tmp_path: Path) -> None:
    directory = tmp_path / "commitlog"
    directory.mkdir()
    warmer = PageWarmer(directory, FILE_SIZE, ahead_bytes=FILE_SIZE, step_bytes=4096, spare=True)
    warmer.prepare_spare(0)
    assert (directory / SPARE_PREPARING_NAME).stat().st_size == FILE_SIZE
    assert not (directory / SPARE_NAME).exists()
    warmer.close()
    assert sorted(os.listdir(directory)) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_full_disk_skips_the_spare_until_the_writer_rolls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          code: int) -> None:
    """The spare is off the durability path: a full disk, or any file-system error, skips it."""
    directory = tmp_path / "commitlog"
    directory.mkdir()
    warmer = PageWarmer(directory, FILE_SIZE, spare=True)
    tries: list[int] = []

    def full(fd: int, offset: int, length: int) -> None:
        tries.append(length)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "posix_fallocate", full)
    assert warmer.prepare_spare(100) == 0
    assert warmer.spare_error is not None and os.strerror(code) in warmer.spare_error
    assert os.listdir(directory) == []
    assert warmer.prepare_spare(200) == 0 and len(tries) == 1  # the same file: no new try
    monkeypatch.undo()
    ready_spare(warmer, FILE_SIZE + 5)  # the writer rolled: try again
    assert warmer.spare_error is None and len(tries) == 1
    warmer.close()


def test_a_spare_skipped_when_the_writer_ends_a_file_is_tried_again_once_it_writes_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The written end of a full file is the next file's base: the failed try belongs to the full
    file, and the roll into the next one allows a new try (it used to wait for one more roll)."""
    directory = tmp_path / "commitlog"
    directory.mkdir()
    warmer = PageWarmer(directory, FILE_SIZE, spare=True)

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    assert warmer.prepare_spare(FILE_SIZE) == 0 and warmer.spare_error is not None
    monkeypatch.undo()
    assert warmer.prepare_spare(FILE_SIZE) == 0  # still the full file: no new try
    ready_spare(warmer, FILE_SIZE + 10)
    warmer.close()


def test_a_crash_around_adoption_recovers_like_an_inline_create(tmp_path: Path) -> None:
    """Records written into adopted files, then a kill leaving an adopted file still empty, a ready
    spare and a half-made one: the store recovers every record and nothing else."""
    clock = FakeClock()
    store_dir = tmp_path / "s"
    directory = store_dir / "commitlog"
    with MessageStore.open(store_dir, StoreConfig(geometry=TINY), now_ms=clock) as store:
        store.commitlog.queue.adopt_spares = True
        warmer = PageWarmer(directory, TINY.commitlog_file_size, spare=True)
        for i in range(60):
            ready_spare(warmer, store.commitlog.max_offset)
            store.put(Message("Orders", b"body-%d" % i * 30, keys=[f"k{i}"]))
        assert store.commitlog.queue.spares_adopted >= 3
        last = store.commitlog.queue.last_file
        assert last is not None
        last.append_blank_tail(encode_blank(last.free_bytes))  # full: the next roll adopts a file left empty
        store.commitlog.queue.last_file_for_append(0)
        ready_spare(warmer, store.commitlog.max_offset)
        warmer.prepare_spare(store.commitlog.max_offset)
        shutil.copytree(store_dir, tmp_path / "killed")  # what a SIGKILL here leaves on disk
        warmer.close()
    killed = tmp_path / "killed"
    (killed / "commitlog" / SPARE_PREPARING_NAME).write_bytes(bytes(100))
    create_abort(killed, 1)
    with MessageStore.open(killed, now_ms=clock) as store:
        assert store.recovery.abnormal
        bodies: list[bytes] = []
        while len(bodies) < 61 and (got := store.get("Orders", 0, len(bodies), max_count=16)).messages:
            bodies += [m.body for m in got.messages]
        assert bodies == [b"body-%d" % i * 30 for i in range(60)]
        assert store.put(Message("Orders", b"next")).queue_offset == 60
    assert verify_store(killed).ok


def test_a_really_full_disk_skips_the_spare_and_the_roll_fails_as_before(small_disk: Path) -> None:
    directory = small_disk / "commitlog"
    queue = MappedFileQueue.open(directory, FILE_SIZE)
    queue.adopt_spares = True
    fill(queue)
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, bytes(4096))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    warmer = PageWarmer(directory, FILE_SIZE, spare=True)
    assert warmer.prepare_spare(queue.max_offset) == 0
    assert warmer.spare_error is not None and "No space left" in warmer.spare_error
    assert sorted(os.listdir(directory)) == [queue.files[0].path.name]
    with pytest.raises(OSError) as raised:  # the writer's own allocation meets the full disk
        queue.last_file_for_append(0)
    assert raised.value.errno == errno.ENOSPC and len(queue.files) == 1
    filler.unlink()
    nxt = queue.last_file_for_append(0)  # space again: the roll allocates inline, the spare comes after
    nxt.append(b"y" * 100)
    ready_spare(warmer, queue.max_offset)
    assert warmer.spare_error is None
    warmer.close()
    queue.close()
