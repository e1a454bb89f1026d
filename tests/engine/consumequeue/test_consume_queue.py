from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.consumequeue.consume_queue import ConsumeQueue, ConsumeQueueOrderError, cq_file_size
from mqstore.engine.consumequeue.entry import CQ_DTYPE, CQ_ENTRY_SIZE, FILLER_SIZE, decode_entry, encode_entry
from mqstore.engine.log.mapped_file import file_name

TOPIC = "TopicTest"
EPF = 5  # entries per file: 100-byte files


def open_cq(root: Path, entries_per_file: int = EPF) -> ConsumeQueue:
    return ConsumeQueue.open(root, TOPIC, 0, entries_per_file)


def fill(cq: ConsumeQueue, count: int, start: int = 0) -> None:
    """Entry i points at a 100-byte record at phys 100 * i."""
    for i in range(start, start + count):
        assert cq.append(i, 100 * i, 100, 7 * i)


def queue_dir(root: Path) -> Path:
    return root / TOPIC / "0"


def files_in(root: Path) -> list[str]:
    return sorted(p.name for p in queue_dir(root).iterdir())


def raw_entry(root: Path, queue_offset: int, file_size: int = EPF * CQ_ENTRY_SIZE) -> bytes:
    pos = queue_offset * CQ_ENTRY_SIZE
    data = (queue_dir(root) / file_name(pos - pos % file_size)).read_bytes()
    return data[pos % file_size:pos % file_size + CQ_ENTRY_SIZE]


def recovered(root: Path, entries_per_file: int = EPF) -> ConsumeQueue:
    cq = open_cq(root, entries_per_file)
    cq.recover()
    return cq


# -- format ---------------------------------------------------------------------------------------


def test_entry_bytes_are_phys_size_tags_code(tmp_path: Path) -> None:
    assert encode_entry(123_456, 250, -12_345) == struct.pack(">qiq", 123_456, 250, -12_345)
    assert decode_entry(struct.pack(">qiq", 2**40, 7, 2**63 - 1)) == (2**40, 7, 2**63 - 1)
    assert cq_file_size(300_000) == 6_000_000
    cq = open_cq(tmp_path)
    try:
        cq.append(0, 123_456, 250, -12_345)
        cq.append(1, 123_706, 99, 0)
        assert raw_entry(tmp_path, 0) == struct.pack(">qiq", 123_456, 250, -12_345)
        assert raw_entry(tmp_path, 1) == struct.pack(">qiq", 123_706, 99, 0)
        assert (queue_dir(tmp_path) / file_name(0)).read_bytes()[40:] == bytes(60)
        rows = cq.read(0, 10)
        assert rows["phys_offset"].tolist() == [123_456, 123_706]
        assert rows["size"].tolist() == [250, 99]
        assert rows["tags_code"].tolist() == [-12_345, 0]
        assert cq.entry(1) == (123_706, 99, 0)
        assert cq.last_phys_end() == 123_706 + 99
    finally:
        cq.close()


def test_entry_n_lives_in_the_file_named_by_its_byte_offset(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        fill(cq, 23)
        assert files_in(tmp_path) == [file_name(b) for b in (0, 100, 200, 300, 400)]
        for n in range(23):
            pos = n * 20
            assert (queue_dir(tmp_path) / file_name(pos - pos % 100)).exists()
            assert raw_entry(tmp_path, n) == struct.pack(">qiq", 100 * n, 100, 7 * n)
        assert (cq.min_queue_offset, cq.max_queue_offset) == (0, 23)
        assert cq.entries_per_file == EPF
    finally:
        cq.close()


def test_read_crosses_files(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        fill(cq, 23)
        assert cq.read(3, 9)["phys_offset"].tolist() == [100 * i for i in range(3, 12)]
        assert cq.read(20, 100)["phys_offset"].tolist() == [2000, 2100, 2200]
        assert len(cq.read(23, 5)) == 0
        assert len(cq.read(100, 5)) == 0
        assert cq.entry(23) is None
        assert cq.read(0, 0).dtype.names == cq.read(0, 1).dtype.names == ("phys_offset", "size", "tags_code")
    finally:
        cq.close()


def test_a_read_across_files_is_the_files_big_endian_bytes(tmp_path: Path) -> None:
    """The pull kernel reads the entries' bytes as the files hold them: a read that crosses files
    (joined by concatenate, which answers in native byte order) is those bytes too. Without the cast
    back, a pull across a file boundary read byte-swapped offsets: nothing readable, answered at once
    with the same next offset, pulled again without end."""
    cq = open_cq(tmp_path)
    try:
        fill(cq, 23)
        files = b"".join(bytes(mf.buffer[:mf.written_pos]) for mf in cq.queue.files)
        for first, count in ((3, 9), (0, 23), (4, 1), (5, 5)):
            entries = cq.read(first, count)
            assert entries.dtype == CQ_DTYPE
            assert entries.tobytes() == files[first * CQ_ENTRY_SIZE:(first + count) * CQ_ENTRY_SIZE]
    finally:
        cq.close()


# -- writing (reference §3.3, §11.17) -------------------------------------------------------------


def test_redispatching_an_existing_entry_is_accepted_without_a_second_entry(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        fill(cq, 10)
        before = [(queue_dir(tmp_path) / n).read_bytes() for n in files_in(tmp_path)]
        assert cq.append(0, 0, 100, 0)
        assert cq.append(9, 900, 100, 63)
        assert cq.append(4, 400, 100, 999)  # even with another tags code: the first write stands
        assert cq.max_queue_offset == 10
        assert [(queue_dir(tmp_path) / n).read_bytes() for n in files_in(tmp_path)] == before
    finally:
        cq.close()


def test_redispatch_after_reopen_and_recover(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 7)
    cq.close()
    cq = recovered(tmp_path)
    try:
        assert cq.max_queue_offset == 7 and cq.max_phys_end == 700
        assert cq.append(3, 300, 100, 21)
        assert cq.max_queue_offset == 7
        fill(cq, 3, start=7)
        assert cq.read(0, 20)["phys_offset"].tolist() == [100 * i for i in range(10)]
    finally:
        cq.close()


def test_redispatch_before_recover_lands_on_an_existing_slot(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 7)
    cq.close()
    cq = open_cq(tmp_path)  # no recover: no duplicate guard yet, the slot position still decides
    try:
        assert cq.append(3, 300, 100, 21)
        assert raw_entry(tmp_path, 3) == struct.pack(">qiq", 300, 100, 21)
    finally:
        cq.close()


def test_a_gap_in_queue_offsets_is_an_error(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        fill(cq, 3)
        with pytest.raises(ConsumeQueueOrderError):
            cq.append(5, 500, 100, 0)
        assert cq.max_queue_offset == 3
        assert raw_entry(tmp_path, 3) == bytes(20)
    finally:
        cq.close()


# -- min offset (reference §3.9, §11.20, §11.21) --------------------------------------------------


def test_correct_min_offset(tmp_path: Path) -> None:
    cq = open_cq(tmp_path, 1000)
    try:
        fill(cq, 10_000)
        assert len(files_in(tmp_path)) == 10
        cq.correct_min_offset(0)
        assert cq.min_queue_offset == 0
        cq.correct_min_offset(500)
        assert cq.min_queue_offset == 5
        cq.correct_min_offset(2000)
        assert cq.min_queue_offset == 20
        cq.correct_min_offset(2000)
        assert cq.min_queue_offset == 20
        cq.correct_min_offset(0)  # never moves back
        assert cq.min_queue_offset == 20
        assert cq.read(20, 3)["phys_offset"].tolist() == [2000, 2100, 2200]
        assert cq.read(0, 21)["phys_offset"].tolist() == [2000]  # counted from the asked offset
        assert cq.entry(19) is None and cq.entry(20) == (2000, 100, 140)
        cq.correct_min_offset(2050)  # between records: the first record at or after it
        assert cq.min_queue_offset == 21
        cq.correct_min_offset(1_000_000)  # past the end: the whole queue is expired
        assert cq.min_queue_offset == cq.max_queue_offset == 10_000
        cq.correct_min_offset(1_000_000)
        assert cq.min_queue_offset == 10_000
        assert len(cq.read(0, 10)) == 0
    finally:
        cq.close()


def test_first_entry_past_zero_fills_below_it_then_correct_min_offset(tmp_path: Path) -> None:
    cq = open_cq(tmp_path, 30)
    cq.append(100, 5000, 100, 42)
    # entry 100 is byte 2000, in the file starting at 2000 - 2000 % 600 = 1800: ten fillers precede it
    assert files_in(tmp_path) == [file_name(1800)]
    data = (queue_dir(tmp_path) / file_name(1800)).read_bytes()
    assert data[:200] == struct.pack(">qiq", 0, FILLER_SIZE, 0) * 10
    assert data[200:220] == struct.pack(">qiq", 5000, 100, 42)
    assert (cq.min_queue_offset, cq.max_queue_offset) == (100, 101)
    assert cq.read(0, 200)["phys_offset"].tolist() == [5000]
    assert cq.entry(95) is None
    cq.close()

    cq = recovered(tmp_path, 30)
    try:
        cq.correct_min_offset(1)
        assert (cq.min_queue_offset, cq.max_queue_offset) == (100, 101)
        cq.correct_min_offset(0)  # fillers never count, whatever the commitlog min
        assert cq.min_queue_offset == 100
        assert cq.read(0, 200)["phys_offset"].tolist() == [5000]
        assert cq.max_phys_end == 5100
        assert cq.append(101, 5100, 100, 0)
        assert (cq.min_queue_offset, cq.max_queue_offset) == (100, 102)
    finally:
        cq.close()


def test_first_entry_at_a_file_boundary_needs_no_filler(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        cq.append(10, 777, 50, 0)
        assert files_in(tmp_path) == [file_name(200)]
        assert raw_entry(tmp_path, 10) == struct.pack(">qiq", 777, 50, 0)
        assert (cq.min_queue_offset, cq.max_queue_offset) == (10, 11)
    finally:
        cq.close()


# -- recovery (reference §3.5) --------------------------------------------------------------------


def zero_entry_on_disk(root: Path, queue_offset: int, data: bytes = bytes(20)) -> None:
    pos = queue_offset * CQ_ENTRY_SIZE
    path = queue_dir(root) / file_name(pos - pos % 100)
    raw = bytearray(path.read_bytes())
    raw[pos % 100:pos % 100 + 20] = data
    path.write_bytes(raw)


def test_recover_finds_the_end_of_the_entries(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 12)
    cq.close()
    cq = open_cq(tmp_path)
    assert cq.max_queue_offset == 15  # load puts the cursor at the file end
    cq.recover()
    try:
        assert cq.max_queue_offset == 12 and cq.max_phys_end == 1200
        assert cq.queue.flushed_where == 240
        assert files_in(tmp_path) == [file_name(0), file_name(100), file_name(200)]
        fill(cq, 1, start=12)
        assert cq.read(10, 5)["phys_offset"].tolist() == [1000, 1100, 1200]
    finally:
        cq.close()


@pytest.mark.parametrize("bad", [bytes(20), struct.pack(">qiq", -1, 100, 0), struct.pack(">qiq", 700, 0, 0),
                                 struct.pack(">qiq", 700, -5, 0)])
def test_recover_cuts_at_the_first_invalid_entry_and_removes_later_files(tmp_path: Path, bad: bytes) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 12)
    cq.close()
    zero_entry_on_disk(tmp_path, 7, bad)
    cq = recovered(tmp_path)
    try:
        assert cq.max_queue_offset == 7 and cq.max_phys_end == 700
        assert files_in(tmp_path) == [file_name(0), file_name(100)]
    finally:
        cq.close()
    # the cut zeroed what followed it: a second recovery sees the same end
    assert (queue_dir(tmp_path) / file_name(100)).read_bytes()[40:] == bytes(60)
    cq = recovered(tmp_path)
    try:
        assert cq.max_queue_offset == 7
    finally:
        cq.close()


def test_recover_cut_at_a_file_start_keeps_that_file_empty(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 12)
    cq.close()
    zero_entry_on_disk(tmp_path, 10)
    cq = recovered(tmp_path)
    try:
        assert cq.max_queue_offset == 10
        assert files_in(tmp_path) == [file_name(0), file_name(100), file_name(200)]
        fill(cq, 1, start=10)
        assert cq.max_queue_offset == 11
    finally:
        cq.close()


# Regression: recover() once read max_phys_end from the last file only (-1 when it was empty).


def test_recover_cut_at_a_file_start_keeps_max_phys_end(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 12)
    cq.close()
    zero_entry_on_disk(tmp_path, 10)
    cq = recovered(tmp_path)
    try:
        assert cq.max_phys_end == 1000
    finally:
        cq.close()


def test_recover_after_a_crash_between_creating_a_file_and_writing_into_it(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 10)
    cq.queue.last_file_for_append(0)  # file 200 allocated; the process dies before the entry lands
    cq.close()
    cq = recovered(tmp_path)
    try:
        assert cq.max_queue_offset == 10
        # -1 here also makes ConsumeQueueStore.truncate_dirty skip this queue
        assert cq.max_phys_end == 1000
    finally:
        cq.close()


def test_recover_checks_only_the_last_three_files(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 25)
    cq.close()
    zero_entry_on_disk(tmp_path, 2)  # in file 0, the 4th file from the end
    cq = recovered(tmp_path)
    try:
        assert cq.max_queue_offset == 25
    finally:
        cq.close()


def test_recover_an_empty_queue(tmp_path: Path) -> None:
    cq = recovered(tmp_path)
    try:
        assert (cq.min_queue_offset, cq.max_queue_offset, cq.max_phys_end) == (0, 0, -1)
        assert cq.last_phys_end() == -1
    finally:
        cq.close()


# -- truncate_dirty (reference §3.6) --------------------------------------------------------------


@pytest.mark.parametrize(("phys", "kept"), [(1200, 12), (2000, 12), (1100, 11), (700, 7), (650, 7), (601, 7),
                                            (500, 5), (499, 5), (100, 1), (1, 1), (0, 0)])
def test_truncate_dirty_drops_entries_at_or_after_the_phys_offset(tmp_path: Path, phys: int, kept: int) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 12)
    cq.flush()
    try:
        cq.truncate_dirty(phys)
        assert cq.max_queue_offset == kept
        assert cq.max_phys_end == (100 * kept if kept else -1)
        assert cq.read(0, 20)["phys_offset"].tolist() == [100 * i for i in range(kept)]
        expected_files = [file_name(100 * i) for i in range(max(1, -(-kept // EPF)))]
        assert files_in(tmp_path) == expected_files
        last_base = 100 * (len(expected_files) - 1)
        tail = (queue_dir(tmp_path) / file_name(last_base)).read_bytes()[kept * CQ_ENTRY_SIZE - last_base:]
        assert tail == bytes(len(tail))
        fill(cq, 1, start=kept)
        assert cq.max_queue_offset == kept + 1
    finally:
        cq.close()


# Regression: truncate_dirty() once deleted trailing files without lowering flushed_where.


def test_truncate_dirty_keeps_the_flushed_cursor_within_the_queue(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        fill(cq, 12)
        assert cq.queue.flush_all() == 240
        cq.truncate_dirty(500)  # files 200 and 100 go whole; file 0 is kept full
        assert cq.max_queue_offset == 5
        assert cq.queue.flushed_where <= cq.queue.max_offset
    finally:
        cq.close()


def test_entries_written_after_truncate_dirty_are_flushed(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        fill(cq, 12)
        cq.queue.flush_all()
        cq.truncate_dirty(500)
        fill(cq, 5, start=5)  # file 100 again, full
        fill(cq, 1, start=10)
        cq.queue.flush_all()
        assert [mf.flushed_pos for mf in cq.queue.files] == [mf.written_pos for mf in cq.queue.files]
        assert cq.queue.flushed_where == cq.queue.max_offset == 220
    finally:
        cq.close()


# -- time lookup (reference §3.8, §11.25) ---------------------------------------------------------

STORE_MS = [1000, 1010, 1020, 1020, 1020, 1030, 1040, 1050, 1060, 1070, 1080, 1090]


def store_ms_at(phys: int) -> int:
    return STORE_MS[phys // 100]


@pytest.fixture
def timed(tmp_path: Path) -> ConsumeQueue:
    cq = open_cq(tmp_path)
    fill(cq, len(STORE_MS))
    return cq


@pytest.mark.parametrize(("ts", "lower", "upper"), [
    (1000, 0, 0),
    (1010, 1, 1),
    (1008, 1, 0),     # ts - 2: LOWER gives the same entry, UPPER the one before
    (1020, 2, 4),     # equal times: LOWER the first, UPPER the last
    (1019, 2, 1),
    (1021, 5, 4),
    (1090, 11, 11),
    (999, 0, 0),      # before everything: the min offset either way
    (-5, 0, 0),
    (1091, 12, 11),   # after everything: LOWER the max offset, UPPER the last entry
    (10**15, 12, 11),
])
def test_queue_offset_by_time(timed: ConsumeQueue, ts: int, lower: int, upper: int) -> None:
    try:
        assert timed.queue_offset_by_time(ts, store_ms_at) == lower
        assert timed.queue_offset_by_time(ts, store_ms_at, upper=True) == upper
    finally:
        timed.close()


def test_queue_offset_by_time_finds_every_entry_by_its_store_time(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    times = {100 * i: 1_700_000_000_000 + 3 * i for i in range(23)}
    try:
        fill(cq, 23)
        for i in range(23):
            ts = times[100 * i]
            qo = cq.queue_offset_by_time(ts, times.__getitem__)
            assert cq.entry(qo) == (100 * i, 100, 7 * i)
            assert cq.queue_offset_by_time(ts - 2, times.__getitem__) == i
            assert cq.queue_offset_by_time(ts, times.__getitem__, upper=True) == i
    finally:
        cq.close()


def test_queue_offset_by_time_respects_the_min_offset(timed: ConsumeQueue) -> None:
    try:
        timed.correct_min_offset(300)
        assert timed.min_queue_offset == 3
        assert timed.queue_offset_by_time(0, store_ms_at) == 3
        assert timed.queue_offset_by_time(0, store_ms_at, upper=True) == 3
        assert timed.queue_offset_by_time(1020, store_ms_at) == 3
        assert timed.queue_offset_by_time(1020, store_ms_at, upper=True) == 4
    finally:
        timed.close()


def test_queue_offset_by_time_treats_deleted_records_as_too_early(timed: ConsumeQueue) -> None:
    def gone_below_500(phys: int) -> int:
        return -1 if phys < 500 else store_ms_at(phys)

    try:
        assert timed.queue_offset_by_time(0, gone_below_500) == 5
        assert timed.queue_offset_by_time(1040, gone_below_500) == 6
    finally:
        timed.close()


def test_queue_offset_by_time_on_an_empty_queue(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        assert cq.queue_offset_by_time(1000, store_ms_at) == 0
        assert cq.queue_offset_by_time(1000, store_ms_at, upper=True) == 0
    finally:
        cq.close()


# -- deletion (reference §10.3) -------------------------------------------------------------------


def test_delete_expired(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    try:
        fill(cq, 20)
        assert cq.delete_expired(1000) == 2  # files 0 and 100 end with records at 400 and 900
        assert files_in(tmp_path) == [file_name(200), file_name(300)]
        assert (cq.min_queue_offset, cq.max_queue_offset) == (10, 20)
        assert cq.delete_expired(1050) == 0
        assert cq.min_queue_offset == 11
        assert cq.read(11, 2)["phys_offset"].tolist() == [1100, 1200]
        assert cq.delete_expired(10**9) == 1  # never the last file
        assert files_in(tmp_path) == [file_name(300)]
        assert cq.min_queue_offset == cq.max_queue_offset == 20
        fill(cq, 1, start=20)
        assert cq.read(20, 5)["phys_offset"].tolist() == [2000]
    finally:
        cq.close()


def test_min_offset_after_reopen_follows_the_first_file(tmp_path: Path) -> None:
    cq = open_cq(tmp_path)
    fill(cq, 20)
    cq.delete_expired(1000)
    cq.close()
    cq = recovered(tmp_path)
    try:
        assert (cq.min_queue_offset, cq.max_queue_offset) == (10, 20)
        assert np.array_equal(cq.read(10, 3)["phys_offset"], np.array([1000, 1100, 1200]))
    finally:
        cq.close()


@given(phys_offset=st.integers(-(2**63), 2**63 - 1), size=st.integers(-(2**31), 2**31 - 1),
       tags_code=st.integers(-(2**63), 2**63 - 1))
def test_entry_codec_round_trip_and_numpy_view_agree(phys_offset: int, size: int, tags_code: int) -> None:
    data = encode_entry(phys_offset, size, tags_code)
    assert len(data) == CQ_ENTRY_SIZE
    assert decode_entry(data) == (phys_offset, size, tags_code)
    row = np.frombuffer(data, dtype=CQ_DTYPE)[0]
    assert (int(row["phys_offset"]), int(row["size"]), int(row["tags_code"])) == (phys_offset, size, tags_code)
    for cut in range(CQ_ENTRY_SIZE):  # a short entry is never silently read as a whole one
        with pytest.raises(struct.error):
            decode_entry(data[:cut])


def test_a_batch_cut_short_between_queues_is_dispatched_again_from_its_start(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch is written queue by queue: a process dying after queue 0 took its rows and before
    queue 1 did left queue 1 a gap, and resuming from the furthest entry (queue 0's) never filled
    it (ConsumeQueueOrderError for queue 1's next entry, in a full-disk CI run). The batch's start
    is marked, and resuming from it dispatches the batch again."""
    from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS
    from mqstore.engine.consumequeue.store import NO_BATCH, ConsumeQueueStore

    rows = np.zeros(8, dtype=DISPATCH_COLUMNS)
    rows["phys_offset"] = np.arange(8) * 100
    rows["size"] = 100
    rows["queue_id"] = np.arange(8) % 2
    rows["queue_offset"] = np.arange(8) // 2
    store = ConsumeQueueStore.open(tmp_path / "cq", 16)
    store.dispatch_rows(rows[:2], ["T"])  # queue 0 and 1 at offset 0
    assert store.applied_end() == 200 and store.dispatching_from() == NO_BATCH
    real = ConsumeQueue.append_entries

    def fail_on_queue_1(cq: ConsumeQueue, *args: object, **kwargs: object) -> None:
        if cq.queue_id == 1:
            raise OSError(28, "No space left on device")
        real(cq, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ConsumeQueue, "append_entries", fail_on_queue_1)
    with pytest.raises(OSError):
        store.dispatch_rows(rows[2:], ["T"])
    assert store.max_phys_end() == 700  # queue 0 is ahead of queue 1 ...
    assert store.applied_end() == 200   # ... and dispatch resumes where the batch began
    store.close()
    monkeypatch.setattr(ConsumeQueue, "append_entries", real)
    reopened = ConsumeQueueStore.open(tmp_path / "cq", 16)
    reopened.recover()  # as a restarting builder and store recovery do
    assert reopened.applied_end() == 200
    reopened.dispatch_rows(rows[np.flatnonzero(rows["phys_offset"] >= reopened.applied_end())], ["T"])
    assert [reopened.get("T", q).max_queue_offset for q in (0, 1)] == [4, 4]  # type: ignore[union-attr]
    assert reopened.applied_end() == 800 and reopened.dispatching_from() == NO_BATCH
    reopened.close()
    assert not (tmp_path / "cq" / ".dispatching").exists()  # a derived directory like any rebuilt one


def test_a_mark_outlives_a_process_that_dies_mid_batch(tmp_path: Path) -> None:
    """The mark is set by a store into a mapping, no syscall: a process killed between queues
    (os._exit: no close, no cleanup) leaves it in the page cache for the next one to resume from."""
    from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS
    from mqstore.engine.consumequeue.store import NO_BATCH, ConsumeQueueStore

    rows = np.zeros(4, dtype=DISPATCH_COLUMNS)
    rows["phys_offset"] = np.arange(4) * 100
    rows["size"] = 100
    rows["queue_id"] = np.arange(4) % 2
    rows["queue_offset"] = np.arange(4) // 2
    pid = os.fork()
    if pid == 0:  # the child: one whole batch, then dies inside the second, after queue 0
        store = ConsumeQueueStore.open(tmp_path / "cq", 16)
        store.dispatch_rows(rows[:2], ["T"])
        real = ConsumeQueue.append_entries

        def die_on_queue_1(cq: ConsumeQueue, *args: object, **kwargs: object) -> None:
            if cq.queue_id == 1:
                os._exit(0)
            real(cq, *args, **kwargs)  # type: ignore[arg-type]

        ConsumeQueue.append_entries = die_on_queue_1  # type: ignore[method-assign]
        store.dispatch_rows(rows[2:], ["T"])
        os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0
    after = ConsumeQueueStore.open(tmp_path / "cq", 16)
    after.recover()  # as a restarting builder does
    assert after.max_phys_end() == 300 and after.dispatching_from() == 200 and after.applied_end() == 200
    after.dispatch_rows(rows[2:], ["T"])
    assert after.dispatching_from() == NO_BATCH and after.applied_end() == 400
    after.close()
    assert not (tmp_path / "cq" / ".dispatching").exists()


def test_a_gap_whose_records_retention_took_is_filled_not_an_order_error(tmp_path: Path) -> None:
    """A full disk let retention delete commitlog files whose records the consume-queue builder had
    not applied yet: the queue's next record then came with a queue offset past its end, and both
    the builder and the store's recovery raised ConsumeQueueOrderError (the full-disk harness in CI).
    The missing entries are expired: fillers stand for them. A gap whose records still exist stays
    an error."""
    cq = ConsumeQueue.open(tmp_path, "T", 0, 4)
    for qo in range(3):
        cq.append(qo, qo * 100, 100, 0)
    with pytest.raises(ConsumeQueueOrderError):
        cq.append(9, 5_000, 100, 7)  # nothing expired: a real gap
    with pytest.raises(ConsumeQueueOrderError):
        cq.append(9, 5_000, 100, 7, expired_below=200)  # the queue's last record (200..300) still exists
    assert cq.append(9, 5_000, 100, 7, expired_below=1_000)
    assert cq.max_queue_offset == 10
    assert [cq.entry(qo) for qo in range(3, 9)] == [(0, FILLER_SIZE, 0)] * 6
    assert cq.entry(9) == (5_000, 100, 7)
    cq.close()
