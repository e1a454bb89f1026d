from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine.keyindex import buckets
from mqstore.engine.keyindex.index_file import (
    INDEX_ENTRY_DTYPE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_DTYPE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    IndexFile,
    IndexFileError,
    index_file_size,
)
from mqstore.engine.keyindex.keys import index_hash

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


def entry_pos(slot_count: int, entry_no: int) -> int:
    return INDEX_HEADER_SIZE + slot_count * INDEX_SLOT_SIZE + entry_no * INDEX_ENTRY_SIZE


# -- RocketMQ acceptance scenarios (reference §11.1, §11.2) ---------------------------------------


def test_put_key_fills_100_slot_400_entry_file(tmp_path: Path) -> None:
    with IndexFile.create(tmp_path / "f", slot_count=100, entry_count=400) as f:
        for i in range(399):  # entry #0 is never used, so 399 fit
            assert f.put_key(str(i), i, 1_700_000_000_000)
        assert f.is_full
        assert not f.put_key("400", 400, 1_700_000_000_000)
        assert f.index_count == 400


def test_select_phys_offset_finds_exactly_one(tmp_path: Path) -> None:
    with IndexFile.create(tmp_path / "f", slot_count=100, entry_count=400) as f:
        for i in range(399):
            f.put_key(str(i), i, 1_700_000_000_000)
        assert f.select_phys_offsets("60", 10, 0, LONG_MAX) == [60]


# -- fixed vectors, derived by hand from the Java formulas ----------------------------------------


def test_fixed_vector_bytes(tmp_path: Path) -> None:
    # "ab".hashCode() = 31*'a' + 'b' = 31*97 + 98 = 3105 = 0x0C21; slot 3105 % 7 = 4 -> pos 40 + 16 = 56
    # "ba".hashCode() = 31*98 + 97 = 3135 = 0x0C3F; slot 3135 % 7 = 6 -> pos 40 + 24 = 64
    # entries start at 40 + 7*4 = 68; entry n at 68 + 20n: #1 = 88, #2 = 108, #3 = 128; size 148.
    # store times: 1_700_000_000_123 = 0x18BCFE5687B (first: timeDiff 0, header begin was 0)
    #              1_700_000_002_623 -> (2623 - 123) // 1000 = 2 s
    #              1_700_000_004_000 -> (4000 - 123) // 1000 = 3 s; 0x18BCFE577A0
    path = tmp_path / "f"
    with IndexFile.create(path, slot_count=7, entry_count=4) as f:
        assert f.put_key("ab", 0x1000, 1_700_000_000_123)
        assert f.put_key("ab", 5000, 1_700_000_002_623)
        assert f.put_key("ba", 0x2000, 1_700_000_004_000)
        assert not f.put_key("ab", 0x3000, 1_700_000_005_000)  # indexCount 4 >= 4 entries
        f.flush()
    data = path.read_bytes()
    assert len(data) == 148
    assert data[0:40] == bytes.fromhex(
        "0000018BCFE5687B"  # beginTimestamp
        "0000018BCFE577A0"  # endTimestamp
        "0000000000001000"  # beginPhyOffset
        "0000000000002000"  # endPhyOffset
        "00000002"  # hashSlotCount: slots 4 and 6
        "00000004"  # indexCount
    )
    assert data[56:60] == bytes.fromhex("00000002")  # newest "ab" entry
    assert data[64:68] == bytes.fromhex("00000003")
    assert data[40:56] + data[60:64] == bytes(20)
    assert data[68:88] == bytes(20)  # entry #0 unused
    assert data[88:108] == bytes.fromhex("00000C2100000000000010000000000000000000")
    assert data[108:128] == bytes.fromhex("00000C2100000000000013880000000200000001")
    assert data[128:148] == bytes.fromhex("00000C3F00000000000020000000000300000000")


def test_new_file_header_and_seed(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with IndexFile.create(path, slot_count=2, entry_count=3) as f:
        assert (f.begin_ms, f.end_ms, f.begin_phys_offset, f.end_phys_offset) == (0, 0, 0, 0)
        assert (f.slot_used_count, f.index_count) == (0, 1)
    assert path.read_bytes()[:40] == bytes(36) + b"\x00\x00\x00\x01"
    assert os.path.getsize(path) == 40 + 2 * 4 + 3 * 20 == index_file_size(2, 3)

    seeded = tmp_path / "g"
    with IndexFile.create(seeded, 2, 3, begin_phys_offset=0x1234, begin_ms=0x5678):
        pass
    assert seeded.read_bytes()[:40] == bytes.fromhex(
        "00000000000056780000000000005678000000000000123400000000000012340000000000000001"
    )
    with IndexFile.create(tmp_path / "h", 2, 3, begin_phys_offset=-5, begin_ms=0) as f:
        assert (f.begin_phys_offset, f.end_phys_offset) == (0, 0)  # only values > 0 seed


def test_first_entry_of_seeded_file_is_relative_to_seed(tmp_path: Path) -> None:
    # putKey computes timeDiff before it overwrites beginTimestamp with the first store time.
    with IndexFile.create(tmp_path / "f", 1, 4, begin_phys_offset=100, begin_ms=10_000) as f:
        assert f.put_key("k", 200, 15_500)
        assert struct.unpack_from(">iqii", f.path.read_bytes(), entry_pos(1, 1)) == (
            index_hash("k"),
            200,
            5,
            0,
        )
        assert (f.begin_ms, f.begin_phys_offset) == (15_500, 200)
        assert f.select_phys_offsets("k", 10, 20_500, 20_500) == [200]
        assert f.select_phys_offsets("k", 10, 15_500, 15_500) == []


def time_diff_s(store_ms: int, begin_ms: int) -> int:
    """The timeDiff the put writes for an entry stored at ``store_ms`` in a file begun at ``begin_ms``."""
    header = np.zeros(1, INDEX_HEADER_DTYPE)
    header["begin_ms"], header["index_count"] = begin_ms, 2  # not the file's first entry: measured from begin
    entries = np.zeros(3, INDEX_ENTRY_DTYPE)
    assert buckets.put(header, np.zeros(1, ">i4"), entries, np.array([7]), np.array([0]), np.array([store_ms])) == 1
    return int(entries["time_diff_s"][2])


def test_time_diff_clamps() -> None:
    assert time_diff_s(5_000, 0) == 0
    assert time_diff_s(5_000, -1) == 0
    assert time_diff_s(1_000, 5_000) == 0
    assert time_diff_s(5_999, 1_000) == 4
    assert time_diff_s(LONG_MAX, 1) == INT_MAX


# -- chain walk ----------------------------------------------------------------------------------


@pytest.mark.parametrize("keys", [("Aa", "BB"), ("AaAa", "BBBB", "AaBB")])
def test_colliding_keys_both_found(tmp_path: Path, keys: tuple[str, ...]) -> None:
    assert len({index_hash(k) for k in keys}) == 1
    with IndexFile.create(tmp_path / "f", 11, 10) as f:
        for phys_offset, key in enumerate(keys, start=1):
            f.put_key(key, phys_offset * 100, 1_000_000)
        expected = [phys_offset * 100 for phys_offset in range(len(keys), 0, -1)]
        for key in keys:
            assert f.select_phys_offsets(key, 10, 0, LONG_MAX) == expected
        assert f.slot_used_count == 1


def test_chain_across_keys_in_one_slot(tmp_path: Path) -> None:
    with IndexFile.create(tmp_path / "f", slot_count=1, entry_count=20) as f:
        for i in range(18):
            f.put_key(f"k{i % 3}", i * 10, 1_000_000 + i * 1000)
        assert f.slot_used_count == 1
        assert f.select_phys_offsets("k0", 100, 0, LONG_MAX) == [150, 120, 90, 60, 30, 0]
        assert f.select_phys_offsets("k2", 100, 0, LONG_MAX) == [170, 140, 110, 80, 50, 20]
        assert f.select_phys_offsets("k1", 2, 0, LONG_MAX) == [160, 130]
        assert f.select_phys_offsets("k1", 0, 0, LONG_MAX) == []
        assert f.select_phys_offsets("nope", 100, 0, LONG_MAX) == []


def test_time_range_has_second_resolution(tmp_path: Path) -> None:
    begin = 1_000_000
    with IndexFile.create(tmp_path / "f", 3, 10) as f:
        f.put_key("k", 1, begin)  # time read back: begin
        f.put_key("k", 2, begin + 1_999)  # 1 s -> begin + 1000
        f.put_key("k", 3, begin + 5_000)  # 5 s -> begin + 5000
        assert f.select_phys_offsets("k", 10, begin + 1_000, begin + 1_000) == [2]
        assert f.select_phys_offsets("k", 10, begin + 1_001, begin + 4_999) == []
        assert f.select_phys_offsets("k", 10, begin + 1_000, LONG_MAX) == [3, 2]
        assert f.select_phys_offsets("k", 10, 0, begin + 999) == [1]


def test_is_time_matched(tmp_path: Path) -> None:
    with IndexFile.create(tmp_path / "f", 3, 10) as f:
        f.put_key("k", 1, 10_000)
        f.put_key("k", 2, 20_000)
        assert f.is_time_matched(5_000, 30_000)  # covers the file
        assert f.is_time_matched(10_000, 10_000)
        assert f.is_time_matched(20_000, 40_000)
        assert f.is_time_matched(0, 15_000)
        assert not f.is_time_matched(0, 9_999)
        assert not f.is_time_matched(20_001, 30_000)


def test_corrupt_cycle_terminates(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with IndexFile.create(path, 1, 5) as f:
        for i in range(3):
            f.put_key("k", i, 1_000)
    with path.open("r+b") as raw:  # entry #1's prev -> #3 makes 3 -> 2 -> 1 -> 3 ...
        raw.seek(entry_pos(1, 1) + 16)
        raw.write(struct.pack(">i", 3))
    with IndexFile.open(path, 1, 5) as f:
        assert len(f.select_phys_offsets("k", 64, 0, LONG_MAX)) <= f.index_count
        for keys in (1, 2):  # one key walked entry by entry, two through numpy
            pages: list[list[int]] = []
            from_nos = [0] * keys
            while not pages or from_nos[0]:  # paged one entry at a time, the walk still ends
                found, from_nos = f.select_page([index_hash("k")] * keys, [1] * keys, from_nos, 0, LONG_MAX)
                pages.append(found[0])
            assert pages == [[2], [1], [0]]  # a chain only goes down: #1 -> #3 ends it


def test_slot_pointing_past_index_count_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with IndexFile.create(path, 1, 5) as f:
        f.put_key("k", 7, 1_000)
    with path.open("r+b") as raw:
        raw.seek(INDEX_HEADER_SIZE)
        raw.write(struct.pack(">i", 9))
    with IndexFile.open(path, 1, 5) as f:
        assert f.select_phys_offsets("k", 10, 0, LONG_MAX) == []
        assert f.put_key("k", 8, 2_000)  # stale slot counts as empty
        assert f.slot_used_count == 2
        assert f.select_phys_offsets("k", 10, 0, LONG_MAX) == [8]


# -- lifecycle -----------------------------------------------------------------------------------


def test_reopen_gives_identical_answers(tmp_path: Path) -> None:
    path = tmp_path / "f"
    keys = [f"key-{i % 7}" for i in range(40)]
    with IndexFile.create(path, 5, 50) as f:
        for i, key in enumerate(keys):
            f.put_key(key, i * 64, 1_700_000_000_000 + i * 700)
        before = {key: f.select_phys_offsets(key, 64, 0, LONG_MAX) for key in set(keys)}
        header = (
            f.begin_ms,
            f.end_ms,
            f.begin_phys_offset,
            f.end_phys_offset,
            f.slot_used_count,
            f.index_count,
        )
        f.flush()
    with IndexFile.open(path, 5, 50) as f:
        assert {key: f.select_phys_offsets(key, 64, 0, LONG_MAX) for key in set(keys)} == before
        assert (
            f.begin_ms,
            f.end_ms,
            f.begin_phys_offset,
            f.end_phys_offset,
            f.slot_used_count,
            f.index_count,
        ) == header


def test_open_rejects_other_geometry(tmp_path: Path) -> None:
    path = tmp_path / "f"
    IndexFile.create(path, 4, 8).close()
    with pytest.raises(IndexFileError, match="need"):
        IndexFile.open(path, 4, 9)
    with pytest.raises(IndexFileError):
        index_file_size(0, 8)
    with pytest.raises(IndexFileError):
        index_file_size(5_000_000, 200_000_000)  # larger than a Java int


def test_load_reads_zero_index_count_as_one(tmp_path: Path) -> None:
    path = tmp_path / "f"
    IndexFile.create(path, 2, 4).close()
    with path.open("r+b") as raw:
        raw.seek(36)
        raw.write(bytes(4))
    with IndexFile.open(path, 2, 4) as f:
        assert f.index_count == 1
        assert f.select_phys_offsets("k", 10, 0, LONG_MAX) == []
        f.flush()
    assert path.read_bytes()[36:40] == b"\x00\x00\x00\x01"


def test_read_only_mapping_sees_writer(tmp_path: Path) -> None:
    path = tmp_path / "f"
    with IndexFile.create(path, 3, 6) as writer, IndexFile.open(path, 3, 6, writable=False) as reader:
        writer.put_key("k", 42, 1_000)
        assert reader.select_phys_offsets("k", 10, 0, LONG_MAX) == [42]
        with pytest.raises(IndexFileError):
            reader.put_key("k", 43, 1_000)
        reader.flush()  # nothing to force on a read-only map


def test_create_refuses_existing_and_leaves_no_tmp(tmp_path: Path) -> None:
    path = tmp_path / "f"
    IndexFile.create(path, 2, 3).close()
    with pytest.raises(FileExistsError):
        IndexFile.create(path, 2, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_full_disk_raises_oserror_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, pos: int, size: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(OSError) as excinfo:
        IndexFile.create(tmp_path / "f", 2, 3)
    assert excinfo.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_close_delete_and_use_after_close(tmp_path: Path) -> None:
    path = tmp_path / "f"
    f = IndexFile.create(path, 2, 3)
    f.close()
    f.close()
    assert f.is_closed
    with pytest.raises(IndexFileError):
        f.select_phys_offsets("k", 1, 0, 1)
    with pytest.raises(IndexFileError):
        f.flush()
    g = IndexFile.open(path, 2, 3)
    g.delete()
    assert not path.exists()


def test_put_key_rejects_out_of_range(tmp_path: Path) -> None:
    with IndexFile.create(tmp_path / "f", 2, 3) as f:
        with pytest.raises(ValueError):
            f.put_key("k", -1, 0)
        with pytest.raises(ValueError):
            f.put_key("k", 0, 2**63)
        assert f.index_count == 1


# -- property: lookups agree with an independent model of the chain walk --------------------------

_puts = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "Aa", "BB", "c", "AaAa", "BBBB", "x#1"]),
        st.integers(0, 10_000),  # phys offset increment
        st.integers(0, 3_000),
    ),  # store ms increment
    min_size=0,
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    puts=_puts,
    slot_count=st.integers(1, 7),
    entry_count=st.integers(1, 30),
    seed_ms=st.sampled_from([0, 0, 1_699_999_990_000]),
    range_ms=st.tuples(st.integers(0, 60_000), st.integers(0, 60_000)),
    max_count=st.integers(0, 50),
)
def test_lookup_matches_model(
    tmp_path_factory: pytest.TempPathFactory,
    puts: list[tuple[str, int, int]],
    slot_count: int,
    entry_count: int,
    seed_ms: int,
    range_ms: tuple[int, int],
    max_count: int,
) -> None:
    base_ms = 1_700_000_000_000
    path = tmp_path_factory.mktemp("prop") / "f"
    model: list[tuple[str, int, int]] = []  # (key, phys offset, timeDiff seconds) per entry #1..
    begin_ms = seed_ms
    phys_offset, store_ms = 0, base_ms
    with IndexFile.create(path, slot_count, entry_count, begin_ms=seed_ms) as f:
        for key, phys_step, ms_step in puts:
            phys_offset += phys_step + 1
            store_ms += ms_step
            accepted = f.put_key(key, phys_offset, store_ms)
            assert accepted == (len(model) + 1 < entry_count)
            if accepted:
                model.append((key, phys_offset, time_diff_s(store_ms, begin_ms)))
                if len(model) == 1:
                    begin_ms = store_ms
        assert f.index_count == len(model) + 1
        lo_ms, hi_ms = base_ms + min(range_ms), base_ms + max(range_ms)
        for key in {k for k, _, _ in puts}:
            key_hash = index_hash(key)
            expected: list[int] = []
            for entry_key, entry_phys, diff_s in reversed(model):
                if len(expected) >= max_count:
                    break
                if index_hash(entry_key) % slot_count != key_hash % slot_count:
                    continue
                time_read_ms = begin_ms + diff_s * 1000
                if index_hash(entry_key) == key_hash and lo_ms <= time_read_ms <= hi_ms:
                    expected.append(entry_phys)
                if time_read_ms < lo_ms:
                    break
            got = f.select_phys_offsets(key, max_count, lo_ms, hi_ms)
            assert got == expected
            assert got == sorted(got, reverse=True)  # newest first
            times = {p: begin_ms + d * 1000 for _, p, d in model}
            assert all(lo_ms <= times[p] <= hi_ms for p in got)
            if seed_ms == 0:  # unseeded: times never decrease, so the walk misses nothing in range
                own = [p for k, p, d in reversed(model) if k == key and lo_ms <= times[p] <= hi_ms]
                got_all = f.select_phys_offsets(key, len(model) + 1, lo_ms, hi_ms)
                assert [p for p in got_all if p in set(own)] == own
