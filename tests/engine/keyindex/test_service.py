from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.engine.keyindex.file_names import index_file_name
from mqstore.engine.keyindex.index_file import IndexFile, IndexFileError
from mqstore.engine.keyindex.keys import index_key
from mqstore.engine.keyindex.pages import QueryOffsetResult
from mqstore.engine.keyindex.service import IndexService

LONG_MAX = 2**63 - 1
T0 = 1_700_000_000_000


class FakeClock:
    def __init__(self, now_ms: int = T0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def service(tmp_path: Path, clock: FakeClock) -> Iterator[IndexService]:
    # 4 entries per file = 3 usable, so a file rolls every 3 keys.
    svc = IndexService.open(tmp_path / "index", 3, 4, clock)
    yield svc
    svc.close()


def put(
    svc: IndexService,
    phys_offset: int,
    *keys: str,
    uniq: str | None = None,
    ms: int = T0,
    sys_flag: int = 0,
    topic: str = "T",
) -> None:
    svc.build(topic, list(keys), uniq, phys_offset, ms, sys_flag)


def offsets(
    svc: IndexService,
    key: str,
    topic: str = "T",
    begin_ms: int = 0,
    end_ms: int = LONG_MAX,
    max_count: int = 64,
) -> list[int]:
    return svc.query(topic, key, max_count, begin_ms, end_ms).phys_offsets


# -- RocketMQ acceptance scenario (reference §11.3) ----------------------------------------------


def test_query_without_index_files_does_not_raise(tmp_path: Path, clock: FakeClock) -> None:
    svc = IndexService.open(tmp_path / "index", 5_000_000, 20_000_000, clock)
    assert svc.query("test", "", 2**31 - 1, 10, 100) == QueryOffsetResult([], 0, 0)
    assert svc.files == ()
    assert svc.last_file is None
    assert list((tmp_path / "index").iterdir()) == []
    svc.close()


# -- build ---------------------------------------------------------------------------------------


def test_build_indexes_uniq_key_then_keys(service: IndexService) -> None:
    put(service, 100, "k1", "", "k2", uniq="U1")  # the empty token (two spaces in KEYS) is skipped
    f = service.last_file
    assert f is not None and f.index_count == 4  # 3 entries: U1, k1, k2
    for key in ("U1", "k1", "k2"):
        assert offsets(service, key) == [100]
    assert offsets(service, "k1", topic="other") == []
    assert index_key("T", "k1") == "T#k1"
    assert f.select_phys_offsets("T#U1", 10, 0, LONG_MAX) == [100]


def test_rollback_is_not_indexed_but_prepared_and_commit_are(service: IndexService) -> None:
    put(service, 10, "rb", sys_flag=0xC)
    put(service, 20, "prep", sys_flag=0x4)
    put(service, 30, "commit", sys_flag=0x8 | 0x1)
    assert offsets(service, "rb") == []
    assert offsets(service, "prep") == [20]
    assert offsets(service, "commit") == [30]


def test_record_below_end_offset_is_skipped(service: IndexService) -> None:
    put(service, 500, "a")
    put(service, 400, "b")  # already indexed once, in RocketMQ's terms
    assert offsets(service, "b") == []


def test_redispatch_of_newest_record_is_idempotent(service: IndexService) -> None:
    put(service, 100, "a", uniq="U")
    put(service, 100, "a", uniq="U")
    f = service.last_file
    assert f is not None and f.index_count == 3
    assert offsets(service, "a") == [100] and offsets(service, "U") == [100]


def test_redispatch_completes_a_record_cut_off_mid_build(service: IndexService) -> None:
    put(service, 50, "x")
    put(service, 100, uniq="U")  # as if killed after the first of its keys
    put(service, 100, "a", "b", uniq="U")  # re-dispatch: U is there, a fills the file, b rolls
    assert [f.index_count for f in service.files] == [4, 2]
    assert offsets(service, "U") == [100]
    assert offsets(service, "a") == [100] and offsets(service, "b") == [100]
    put(service, 100, "a", "b", uniq="U")  # the record straddles a roll: both files are checked
    assert [f.index_count for f in service.files] == [4, 2]


# -- rolling -------------------------------------------------------------------------------------


def test_roll_names_seed_and_flush(service: IndexService, clock: FakeClock) -> None:
    put(service, 10, "a", "b", "c", ms=T0 + 1_000)
    assert len(service.files) == 1 and service.files[0].is_full
    assert service.index_msg_ms == 0
    clock.now_ms = T0  # same clock value as the first file: the name is bumped by 1 ms
    put(service, 20, "rb", ms=T0 + 2_000, sys_flag=0xC)  # rolls, then skips the rollback
    first, second = list(service.files)
    assert first.name == index_file_name(T0)
    assert second.name == index_file_name(T0 + 1)
    assert len(second.name) == 17 and second.name.isdigit()
    assert second.index_count == 1
    assert (second.begin_phys_offset, second.end_phys_offset) == (10, 10)
    assert (second.begin_ms, second.end_ms) == (T0 + 1_000, T0 + 1_000)
    assert service.index_msg_ms == T0 + 1_000  # the full file was flushed on roll


def test_names_stay_ascending_when_clock_goes_back(service: IndexService, clock: FakeClock) -> None:
    for i in range(4):
        clock.now_ms = T0 - i * 3_600_000
        put(service, i * 10, "a", "b", "c")
    names = [f.name for f in service.files]
    assert names == sorted(names) and len(set(names)) == 4


def test_query_spans_files_newest_first(service: IndexService) -> None:
    for i in range(10):
        put(service, i * 100, "k", f"other{i}", ms=T0 + i * 1_000)
    assert len(service.files) == 7
    assert offsets(service, "k") == [900, 800, 700, 600, 500, 400, 300, 200, 100, 0]
    assert offsets(service, "k", max_count=3) == [900, 800, 700]
    result = service.query("T", "k", 64, 0, LONG_MAX)
    assert (result.index_last_update_ms, result.index_last_update_phys_offset) == (T0 + 9_000, 900)
    # RocketMQ quirk kept for byte compatibility: the first entry of a rolled file gets its timeDiff
    # against the seed (the previous file's end time) and then begin moves to its own store time,
    # so 600 (stored T0+6000, seed T0+5000) reads back as T0+7000 and 300 as T0+4000.
    assert offsets(service, "k", begin_ms=T0 + 4_000, end_ms=T0 + 6_000) == [500, 400, 300]
    # 800 is not the first entry of its file, so it reads back at its own second.
    assert offsets(service, "k", begin_ms=T0 + 8_000, end_ms=T0 + 8_000) == [800]


def test_max_count_is_capped(tmp_path: Path, clock: FakeClock) -> None:
    svc = IndexService.open(tmp_path / "index", 11, 100, clock)
    for i in range(70):
        put(svc, i, "k")
    assert len(offsets(svc, "k", max_count=2**31 - 1)) == 64
    svc.close()
    small = IndexService.open(tmp_path / "index", 11, 100, clock, max_msgs_num_batch=5)
    assert offsets(small, "k", max_count=1_000) == [69, 68, 67, 66, 65]
    small.close()


def test_pages_go_on_where_the_last_one_stopped(tmp_path: Path, clock: FakeClock) -> None:
    """'Aa' and 'BB' share a hash, so both fill a page of 2; the next page goes on where the last one
    stopped, across files, until every entry of the chain was handed out once."""
    svc = IndexService.open(tmp_path / "index", 3, 8, clock, max_msgs_num_batch=2)
    for i in range(20):
        clock.now_ms += 1
        put(svc, i * 10, "Aa" if i % 3 else "BB", f"other{i}")
    assert len(svc.files) > 3
    for key in ("Aa", "BB"):
        pages = [svc.query("T", key, 64, 0, LONG_MAX)]
        while pages[-1].next_page is not None:
            pages.append(svc.query("T", key, 64, 0, LONG_MAX, after=pages[-1].next_page))
        assert all(len(page.phys_offsets) <= 2 for page in pages)
        assert [p for page in pages for p in page.phys_offsets] == list(range(190, -1, -10))
    keys, counts = ["Aa", "BB", "other5", "none"], [1, 2, 2, 2]
    first = svc.query_many("T", keys, counts, 0, LONG_MAX)
    assert [first.page(i) for i in range(4)] == [svc.query("T", k, c, 0, LONG_MAX)
                                                 for k, c in zip(keys, counts, strict=True)]
    assert first.phys_offsets == [[190], [190, 180], [50], []]
    assert first.next_pages[2] is None and first.next_pages[3] is None  # walked to the end
    second = svc.query_many("T", keys[:2], counts[:2], 0, LONG_MAX, after=first.next_pages[:2])
    assert [second.page(i) for i in range(2)] == [svc.query("T", keys[i], counts[i], 0, LONG_MAX,
                                                            after=first.next_pages[i]) for i in range(2)]
    assert second.phys_offsets == [[180], [170, 160]]
    oldest = pages[-1].next_page or pages[-2].next_page
    assert oldest is not None and oldest.file_name == svc.files[0].name
    assert svc.delete_before(svc.files[1].begin_phys_offset + 1) >= 1  # retention took the cursor's file
    assert svc.query("T", "Aa", 64, 0, LONG_MAX, after=oldest).phys_offsets == []
    svc.close()


def test_reopen_gives_identical_answers(tmp_path: Path, clock: FakeClock) -> None:
    svc = IndexService.open(tmp_path / "index", 3, 4, clock)
    for i in range(8):
        clock.now_ms += 1
        put(svc, i * 10, f"k{i % 3}", "Aa" if i % 2 else "BB", ms=T0 + i * 500)
    keys = ["k0", "k1", "k2", "Aa", "BB", "none"]
    before = {key: svc.query("T", key, 64, 0, LONG_MAX) for key in keys}
    names = [f.name for f in svc.files]
    svc.close()
    svc = IndexService.open(tmp_path / "index", 3, 4, clock)
    assert [f.name for f in svc.files] == names
    assert {key: svc.query("T", key, 64, 0, LONG_MAX) for key in keys} == before
    svc.close()


def test_open_loads_only_index_names_and_removes_stale_tmp(tmp_path: Path, clock: FakeClock) -> None:
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    IndexFile.create(index_dir / "20240101000000002", 3, 4).close()
    IndexFile.create(index_dir / "20240101000000001", 3, 4).close()
    (index_dir / "20240101000000003.tmp").write_bytes(b"half")
    (index_dir / "README").write_text("not an index file")
    svc = IndexService.open(index_dir, 3, 4, clock)
    assert [f.name for f in svc.files] == ["20240101000000001", "20240101000000002"]
    assert sorted(p.name for p in index_dir.iterdir()) == ["20240101000000001", "20240101000000002", "README"]
    svc.close()


def test_open_with_other_geometry_fails(tmp_path: Path, clock: FakeClock) -> None:
    svc = IndexService.open(tmp_path / "index", 3, 4, clock)
    put(svc, 0, "a")
    svc.close()
    with pytest.raises(IndexFileError):
        IndexService.open(tmp_path / "index", 3, 5, clock)
    with pytest.raises(IndexFileError):
        IndexService.open(tmp_path / "index", 3, 1, clock)


def test_full_disk_on_roll_propagates(service: IndexService, monkeypatch: pytest.MonkeyPatch) -> None:
    put(service, 0, "a", "b", "c")

    def no_space(fd: int, pos: int, size: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(OSError) as excinfo:
        put(service, 10, "d")
    assert excinfo.value.errno == errno.ENOSPC
    assert len(service.files) == 1
    assert len(list(service.index_dir.iterdir())) == 1
    monkeypatch.undo()
    put(service, 10, "d")  # space is back: the same record goes in
    assert offsets(service, "d") == [10]


# -- deleting and recovery -----------------------------------------------------------------------


def fill_three_files(svc: IndexService, clock: FakeClock) -> None:
    # file 1: offsets 0, 100, 200 / file 2: 300, 400, 500 / file 3: 600, 700
    for i in range(8):
        clock.now_ms += 10
        put(svc, i * 100, f"k{i}", ms=T0 + i * 1_000)


def test_delete_before_never_deletes_the_last_file(service: IndexService, clock: FakeClock) -> None:
    fill_three_files(service, clock)
    assert service.delete_before(200) == 0  # file 1 ends at 200, not before it
    assert service.delete_before(201) == 1
    assert offsets(service, "k2") == [] and offsets(service, "k3") == [300]
    assert service.delete_before(10_000) == 1
    assert len(service.files) == 1 and offsets(service, "k7") == [700]
    assert len(list(service.index_dir.iterdir())) == 1


def test_drop_newer_than(service: IndexService, clock: FakeClock) -> None:
    fill_three_files(service, clock)
    assert service.flush() == T0 + 5_000  # files 1 and 2 are full and now flushed
    assert service.drop_newer_than(T0 + 5_000) == 1
    assert len(service.files) == 2
    assert offsets(service, "k7") == [] and offsets(service, "k5") == [500]
    assert service.drop_newer_than(0) == 2
    assert not service.files


@pytest.mark.parametrize(
    ("torn_at", "redispatch_from", "files_left"),
    [
        (10_000, 700, 3),  # nothing past the end: re-dispatch after the last indexed record
        (700, 500, 2),  # the last file ends at 700: it goes
        (650, 500, 2),
        (500, 200, 1),  # 500 is file 2's end: that entry points at the torn record itself
        (201, 200, 1),
        (200, 0, 0),  # nothing left: from the oldest deleted file's first offset
        (0, 0, 0),
    ],
)
def test_truncate_after(
    service: IndexService, clock: FakeClock, torn_at: int, redispatch_from: int, files_left: int
) -> None:
    fill_three_files(service, clock)
    before = {f"k{i}": offsets(service, f"k{i}") for i in range(8)}
    assert service.truncate_after(torn_at) == redispatch_from
    assert len(service.files) == files_left
    for key in before:
        assert all(p < torn_at for p in offsets(service, key))
    # The caller re-dispatches every surviving record from the returned offset; build() dedups.
    for i in range(8):
        if redispatch_from <= i * 100 < torn_at:
            clock.now_ms += 10
            put(service, i * 100, f"k{i}", ms=T0 + i * 1_000)
    assert {key: offsets(service, key) for key in before} == {
        key: [p for p in found if p < torn_at] for key, found in before.items()
    }
    assert sum(f.index_count - 1 for f in service.files) == min(8, (torn_at + 99) // 100)


def test_truncate_after_without_files(service: IndexService) -> None:
    assert service.truncate_after(123) == 0


def test_truncate_after_keeps_seeded_start_of_oldest_deleted_file(tmp_path: Path, clock: FakeClock) -> None:
    svc = IndexService.open(tmp_path / "index", 3, 4, clock)
    put(svc, 1_000, "a", "b", "c")
    clock.now_ms += 1
    put(svc, 1_100, "d")
    assert svc.delete_before(1_050) == 1  # commitlog cleanup took the first file
    assert svc.truncate_after(1_100) == 1_100  # the seeded file began at its first record
    assert svc.files == ()
    svc.close()


def test_close_flushes(tmp_path: Path, clock: FakeClock) -> None:
    svc = IndexService.open(tmp_path / "index", 3, 4, clock)
    put(svc, 0, "a")
    svc.close()
    assert svc.files == ()
    svc.close()
