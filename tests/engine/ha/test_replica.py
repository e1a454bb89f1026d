"""A slave's commitlog fed the master's bytes in frames: append, the end builders may read to, and
a crash-safe cut, on real files (TINY geometry: 8 KiB commitlog files, so a few records roll)."""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine import Message, MessageStore, PutResult, StoreConfig
from mqstore.engine.ha.replica import (
    ReplicaBoundaryError,
    ReplicaError,
    ReplicaGapError,
    append_replica,
    complete_end,
    recover_replica,
    truncate_replica,
)
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import file_name
from mqstore.engine.log.record import BLANK_MAGIC
from tests.conftest import TINY, FakeClock

FILE_SIZE = TINY.commitlog_file_size


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MessageStore, list[PutResult]]]:
    """A master store over three files: records of varied sizes, blanks at the first two files' ends."""
    clock = FakeClock()
    store = MessageStore.open(tmp_path_factory.mktemp("master"), StoreConfig(geometry=TINY), now_ms=clock)
    results = []
    for i in range(90):
        clock.advance(1)
        results.append(store.put(Message("Orders", f"body-{i}".encode() * (3 + i % 17), keys=[f"k{i}"]),
                                 queue_id=i % 2))
    assert store.commitlog.max_offset > 2 * FILE_SIZE
    yield store, results
    store.close()


def record_ends(results: list[PutResult], store: MessageStore) -> list[int]:
    return [r.phys_offset + store.commitlog.size_at(r.phys_offset) for r in results]


def ship(source: CommitLog, replica: CommitLog, frame_bytes: int, until: int | None = None) -> Iterator[int]:
    """Send ``source``'s bytes to ``replica`` as a master does: from the replica's end, at most
    ``frame_bytes`` a frame, never across a file; yields the replica's end after each frame."""
    until = source.max_offset if until is None else until
    end = replica.max_offset if replica.queue.files else source.min_offset
    while end < until:
        mf = source.file_for(end)
        assert mf is not None
        size = min(frame_bytes, mf.file_base + mf.written_pos - end, until - end)
        end = append_replica(replica, end, mf.read(end - mf.file_base, size))
        yield end


def expected_complete_end(ends: list[int], received: int, blank_files: dict[int, int]) -> int:
    """The last record end at or before ``received``, or a file's end once its blank tail is in."""
    done = max([e for e in ends if e <= received], default=0)
    for blank_at, file_end in blank_files.items():
        if blank_at == done and file_end <= received:
            done = file_end
    return done


def blanks(store: MessageStore) -> dict[int, int]:
    """Where each blank end-of-file record starts -> its file's end."""
    found = {}
    for mf in store.commitlog.queue.files[:-1]:
        for phys, decoded in store.commitlog.scan(mf.file_base, mf.file_end, read_body=False):
            if decoded.kind.value == "blank":
                found[phys] = mf.file_end
    return found


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame_bytes=st.integers(1, 3000))
def test_replica_is_the_master_byte_for_byte(master: tuple[MessageStore, list[PutResult]], tmp_path: Path,
                                             frame_bytes: int) -> None:
    store, results = master
    ends = record_ends(results, store)
    blank_files = blanks(store)
    assert blank_files, "the master must hold a blank end-of-file record"
    directory = tmp_path / f"slave-{frame_bytes}"
    replica = CommitLog.open(directory, FILE_SIZE)
    try:
        readable = 0
        for received in ship(store.commitlog, replica, frame_bytes):
            readable = complete_end(replica, readable, received)
            assert readable == expected_complete_end(ends, received, blank_files)
        assert readable == store.commitlog.max_offset
        for mf in store.commitlog.queue.files:
            assert (directory / mf.path.name).read_bytes()[:mf.written_pos] == mf.read(0, mf.written_pos)
    finally:
        replica.close()


def test_a_frame_ending_mid_record_is_readable_only_to_the_record_before(
        master: tuple[MessageStore, list[PutResult]], tmp_path: Path) -> None:
    store, results = master
    ends = record_ends(results, store)
    replica = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        mid = results[3].phys_offset + 10
        end = list(ship(store.commitlog, replica, 10_000, until=mid))[-1]
        assert end == mid
        assert complete_end(replica, 0, end) == ends[2] == results[3].phys_offset
        assert complete_end(replica, 0, end, check_crc=True) == ends[2]
        # the rest of the record arrives: it becomes readable
        end = list(ship(store.commitlog, replica, 10_000, until=ends[3]))[-1]
        assert complete_end(replica, ends[2], end) == ends[3]
    finally:
        replica.close()


def test_a_blank_moves_the_end_to_the_next_file_once_its_file_is_whole(
        master: tuple[MessageStore, list[PutResult]], tmp_path: Path) -> None:
    store, _ = master
    blank_at, file_end = min(blanks(store).items())
    replica = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        list(ship(store.commitlog, replica, 10_000, until=blank_at + 8))  # the blank's header, not its tail
        assert struct.unpack_from(">ii", replica.read_bytes(blank_at, 8) or b"")[1] == BLANK_MAGIC
        assert complete_end(replica, 0, replica.max_offset) == blank_at
        list(ship(store.commitlog, replica, 10_000, until=file_end))
        assert complete_end(replica, 0, replica.max_offset) == file_end
        # the next file is made by the first frame that starts at its first byte
        assert replica.queue.files[-1].file_end == file_end
        list(ship(store.commitlog, replica, 100, until=file_end + 100))
        assert replica.queue.files[-1].path.name == file_name(file_end)
    finally:
        replica.close()


def test_append_refuses_gaps_overlaps_and_file_crossings(tmp_path: Path) -> None:
    replica = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        with pytest.raises(ReplicaGapError):
            append_replica(replica, 100, b"x")  # an empty log starts at a file boundary
        assert not replica.queue.files
        assert append_replica(replica, 2 * FILE_SIZE, b"abc") == 2 * FILE_SIZE + 3
        assert replica.queue.files[0].path.name == file_name(2 * FILE_SIZE)
        with pytest.raises(ReplicaGapError):
            append_replica(replica, 2 * FILE_SIZE + 4, b"x")  # a gap
        with pytest.raises(ReplicaGapError):
            append_replica(replica, 2 * FILE_SIZE + 2, b"x")  # bytes it already has
        with pytest.raises(ReplicaBoundaryError):
            append_replica(replica, 2 * FILE_SIZE + 3, bytes(FILE_SIZE - 2))
        assert replica.max_offset == 2 * FILE_SIZE + 3
        assert append_replica(replica, 2 * FILE_SIZE + 3, b"") == 2 * FILE_SIZE + 3  # a heartbeat
        assert append_replica(replica, 2 * FILE_SIZE + 3, bytes(FILE_SIZE - 3)) == 3 * FILE_SIZE
        assert append_replica(replica, 3 * FILE_SIZE, b"y") == 3 * FILE_SIZE + 1
        assert [mf.path.name for mf in replica.queue.files] == [file_name(2 * FILE_SIZE), file_name(3 * FILE_SIZE)]
    finally:
        replica.close()


def _replicate(store: MessageStore, path: Path) -> CommitLog:
    shutil.copytree(store.path / "config", path / "config")  # the store's geometry, as the master saved it
    replica = CommitLog.open(path / "commitlog", FILE_SIZE)
    list(ship(store.commitlog, replica, 1500))
    return replica


def _reopened_end(path: Path, clock: FakeClock) -> tuple[int, MessageStore]:
    """The end the store's own recovery finds after a crash (an abnormal stop)."""
    (path / "abort").write_text("1")
    store = MessageStore.open(path, StoreConfig(geometry=TINY), now_ms=clock)
    return store.commitlog.max_offset, store


@pytest.mark.parametrize("cut", ["mid-file", "file-start", "first-file"])
def test_after_a_cut_recovery_finds_the_end_there(master: tuple[MessageStore, list[PutResult]], tmp_path: Path,
                                                  cut: str) -> None:
    """RocketMQ's slave truncation left the stale tail valid on disk (#10666); here the bytes past the
    cut are zeros on disk and the files after it are gone, so a reopened store and its recovery end
    at the cut, with the records before it and none after."""
    store, results = master
    ends = record_ends(results, store)
    offset = {"mid-file": ends[40], "file-start": FILE_SIZE, "first-file": ends[5]}[cut]
    replica = _replicate(store, tmp_path)
    try:
        assert len(replica.queue.files) == 3
        truncate_replica(replica, offset)
        assert replica.max_offset == offset
        assert complete_end(replica, 0, replica.max_offset) == offset
    finally:
        replica.close()
    holder = tmp_path / "commitlog" / file_name(offset - offset % FILE_SIZE)
    assert holder.read_bytes()[offset % FILE_SIZE:] == bytes(FILE_SIZE - offset % FILE_SIZE)
    # the files before the cut, and the one holding it (zeroed from the cut on)
    assert sorted(p.name for p in (tmp_path / "commitlog").iterdir()) == [
        file_name(base) for base in range(0, offset - offset % FILE_SIZE + 1, FILE_SIZE)]

    reopened = CommitLog.open(tmp_path / "commitlog", FILE_SIZE)
    try:
        assert recover_replica(reopened) == offset
    finally:
        reopened.close()
    end, slave = _reopened_end(tmp_path, FakeClock())
    try:
        assert end == offset
        kept = [r for r, e in zip(results, ends, strict=True) if e <= offset]
        got = slave.get("Orders", 0, 0, max_count=100, max_bytes=1 << 20)
        assert [m.phys_offset for m in got.messages] == [r.phys_offset for r in kept if r.queue_id == 0]
    finally:
        slave.close()


def test_recover_replica_cuts_a_torn_tail(master: tuple[MessageStore, list[PutResult]], tmp_path: Path) -> None:
    """A slave killed inside a frame: the partial record at the end is cut on start, and zeroed."""
    store, results = master
    ends = record_ends(results, store)
    k = next(i for i, r in enumerate(results) if r.phys_offset > FILE_SIZE) + 2  # in the second file
    replica = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        list(ship(store.commitlog, replica, 10_000, until=results[k].phys_offset + 30))
    finally:
        replica.close()
    reopened = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        assert reopened.max_offset == 2 * FILE_SIZE  # every file opens at full length
        assert recover_replica(reopened) == ends[k - 1]
        assert reopened.max_offset == ends[k - 1]
        holder = reopened.file_for(ends[k - 1])
        assert holder is not None
        assert holder.path.read_bytes()[ends[k - 1] - holder.file_base:] == bytes(holder.file_end - ends[k - 1])
        # and the master's bytes follow on from there
        assert list(ship(store.commitlog, reopened, 10_000, until=ends[k + 1]))[-1] == ends[k + 1]
        assert complete_end(reopened, ends[k - 1], reopened.max_offset, check_crc=True) == ends[k + 1]
    finally:
        reopened.close()


def test_truncate_beyond_the_end_is_refused(tmp_path: Path) -> None:
    replica = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        append_replica(replica, 0, b"abc")
        with pytest.raises(ReplicaError):
            truncate_replica(replica, 4)
    finally:
        replica.close()


def test_recover_replica_on_an_empty_log(tmp_path: Path) -> None:
    replica = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        assert recover_replica(replica) == 0
    finally:
        replica.close()


def test_a_cut_is_durable_in_an_order_a_power_cut_cannot_undo(
        master: tuple[MessageStore, list[PutResult]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cut file's zeros are synced before any unlink, and the later files go newest first, each
    unlink synced: a power cut at any point leaves adjacent files with zeros at the cut."""
    store, results = master
    ends = record_ends(results, store)
    replica = _replicate(store, tmp_path)
    directory = (tmp_path / "commitlog").resolve()
    events: list[tuple[str, Path]] = []
    real_fsync, real_unlink = os.fsync, os.unlink

    def fsync(fd: int) -> None:
        events.append(("fsync", Path(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def unlink(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
        events.append(("unlink", Path(path).resolve()))
        real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "unlink", unlink)
    try:
        truncate_replica(replica, ends[10])
    finally:
        monkeypatch.undo()
        replica.close()
    assert events == [("fsync", directory / file_name(0)),
                      ("unlink", directory / file_name(2 * FILE_SIZE)), ("fsync", directory),
                      ("unlink", directory / file_name(FILE_SIZE)), ("fsync", directory)]
