"""Index puts, one key at a time or many at once, leave the bytes ``IndexFile.putKey`` leaves: same
entries, chains, header and slots, across slot collisions, full files and rolls, and after a
re-dispatch of the record at the newest file's end."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine.batch.dispatch import DispatchBatch, DispatchRequest
from mqstore.engine.keyindex.index_file import (
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    IndexFile,
    index_file_size,
)
from mqstore.engine.keyindex.keys import index_hash, index_hashes
from mqstore.engine.keyindex.service import IndexService
from tests.conftest import FakeClock

settings_ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings_
@given(keys=st.lists(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=8),
                     min_size=1, max_size=40),
       seed_ms=st.sampled_from([0, 1_700_000_000_000]), start=st.integers(0, 3),
       cuts=st.lists(st.integers(1, 10), max_size=5))
def test_put_keys_writes_what_put_key_writes(tmp_path_factory: pytest.TempPathFactory, keys: list[str], seed_ms: int,
                                            start: int, cuts: list[int]) -> None:
    root = tmp_path_factory.mktemp("idx")
    one = IndexFile.create(root / "one", 5, 24, begin_phys_offset=100 if seed_ms else 0, begin_ms=seed_ms)
    many = IndexFile.create(root / "many", 5, 24, begin_phys_offset=100 if seed_ms else 0, begin_ms=seed_ms)
    phys = [1000 + 50 * i for i in range(len(keys))]
    times = [1_700_000_000_000 + 700 * i for i in range(len(keys))]
    for f in (one, many):  # a few keys put one by one first, so the batch meets used slots
        for k, p, t in zip(keys[:start], phys[:start], times[:start], strict=False):
            f.put_key(k, p, t)
    put_one = sum(one.put_key(k, p, t) for k, p, t in zip(keys[start:], phys[start:], times[start:], strict=False))
    hashes = np.asarray(index_hashes(keys), np.int64)
    done = min(start, len(keys))
    for cut in [*cuts, len(keys)]:
        done += many.put_keys(hashes[done:done + cut], np.asarray(phys[done:done + cut]),
                              np.asarray(times[done:done + cut]))
    assert done - min(start, len(keys)) == put_one
    assert one.path.read_bytes() == many.path.read_bytes()
    one.close()
    many.close()


def _java_put_key(buf: bytearray, slot_count: int, entry_count: int, key_hash: int, phys_offset: int,
                  store_ms: int) -> bool:
    """``IndexFile.putKey`` of RocketMQ, field by field, as the reference the puts are held to."""
    begin_ms, _end_ms, _begin_phys, _end_phys, slot_used, index_count = struct.unpack_from(">qqqqii", buf, 0)
    index_count = max(index_count, 1)
    if index_count >= entry_count:
        return False
    slot_pos = INDEX_HEADER_SIZE + key_hash % slot_count * INDEX_SLOT_SIZE
    slot_value = struct.unpack_from(">i", buf, slot_pos)[0]
    if slot_value <= 0 or slot_value > index_count:
        slot_value = 0
    diff_s = 0 if begin_ms <= 0 else min(max((store_ms - begin_ms) // 1000, 0), (1 << 31) - 1)
    entry_pos = INDEX_HEADER_SIZE + slot_count * INDEX_SLOT_SIZE + index_count * INDEX_ENTRY_SIZE
    struct.pack_into(">iqii", buf, entry_pos, key_hash, phys_offset, diff_s, slot_value)
    struct.pack_into(">i", buf, slot_pos, index_count)
    if index_count <= 1:
        struct.pack_into(">q", buf, 16, phys_offset)
        struct.pack_into(">q", buf, 0, store_ms)
    if slot_value == 0:
        struct.pack_into(">i", buf, 32, slot_used + 1)
    struct.pack_into(">i", buf, 36, index_count + 1)
    struct.pack_into(">q", buf, 24, phys_offset)
    struct.pack_into(">q", buf, 8, store_ms)
    return True


@settings_
@given(keys=st.lists(st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=0, max_size=6),
                     max_size=40),
       slot_count=st.integers(1, 9), seed_ms=st.sampled_from([0, 1_699_999_990_000]),
       steps_ms=st.lists(st.integers(-5_000, 5_000), min_size=40, max_size=40),
       cuts=st.lists(st.integers(1, 12), max_size=6))
def test_puts_write_the_bytes_of_java_put_key(tmp_path_factory: pytest.TempPathFactory, keys: list[str],
                                              slot_count: int, seed_ms: int, steps_ms: list[int],
                                              cuts: list[int]) -> None:
    """A file filled with ``put_key`` and one filled with ``put_keys`` in batches of any size are both
    the file RocketMQ's putKey writes, byte for byte, full file and store times going back included."""
    entry_count = 24
    root = tmp_path_factory.mktemp("java")
    phys = [1000 + 64 * i for i in range(len(keys))]
    times = [1_700_000_000_000 + sum(steps_ms[:i + 1]) for i in range(len(keys))]
    expected = bytearray(index_file_size(slot_count, entry_count))
    struct.pack_into(">i", expected, 36, 1)
    if seed_ms:
        struct.pack_into(">qqqq", expected, 0, seed_ms, seed_ms, 100, 100)
    accepted = [_java_put_key(expected, slot_count, entry_count, index_hash(k), p, t)
                for k, p, t in zip(keys, phys, times, strict=True)]
    with IndexFile.create(root / "one", slot_count, entry_count, begin_phys_offset=100 if seed_ms else 0,
                          begin_ms=seed_ms) as one:
        assert [one.put_key(k, p, t) for k, p, t in zip(keys, phys, times, strict=True)] == accepted
    with IndexFile.create(root / "many", slot_count, entry_count, begin_phys_offset=100 if seed_ms else 0,
                          begin_ms=seed_ms) as many:
        hashes = np.asarray(index_hashes(keys), np.int64)
        done = 0
        for cut in [*cuts, len(keys)]:
            done += many.put_keys(hashes[done:done + cut], np.asarray(phys[done:done + cut], np.int64),
                                  np.asarray(times[done:done + cut], np.int64))
        assert done == sum(accepted)
    assert (root / "one").read_bytes() == bytes(expected) == (root / "many").read_bytes()


def test_a_refused_put_leaves_the_file_closable(tmp_path: Path) -> None:
    """A put refused mid-call leaves nothing written, and its traceback holds no view of the mapping,
    so the file still closes (a view left alive would make the unmap raise BufferError)."""
    with IndexFile.create(tmp_path / "f", 3, 8) as f:
        with pytest.raises(ValueError, match="phys_offset") as refused:
            f.put_keys(np.array([1, 2], np.int64), np.array([5, -1], np.int64), np.array([1_000, 1_000], np.int64))
        assert f.index_count == 1
    assert f.is_closed and refused.traceback is not None


def _hashed(batch: DispatchBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (batch.rows, *batch.index_keys())


def _requests(n: int, first_phys: int = 0) -> list[DispatchRequest]:
    return [DispatchRequest("T" if i % 3 else "U", i % 2, first_phys + 100 * i, 100, 0, 1_700_000_000_000 + 10 * i,
                            i, (f"k{i}", f"j{i % 4}") if i % 2 else (), f"UNIQ{i:04d}" if i % 5 else None,
                            0xC if i % 7 == 6 else 0) for i in range(n)]


@pytest.mark.parametrize("n", [1, 9, 60])
def test_build_batch_writes_what_build_writes(tmp_path: Path, clock: FakeClock, n: int) -> None:
    one = IndexService.open(tmp_path / "one", 4, 16, clock)
    many = IndexService.open(tmp_path / "many", 4, 16, clock)
    requests = _requests(n)
    for r in requests:
        one.build(r.topic, r.keys, r.uniq_key, r.phys_offset, r.store_ms, r.sys_flag)
    many.build_hashed(*_hashed(DispatchBatch.from_requests(requests[: n // 2])))
    many.build_hashed(*_hashed(DispatchBatch.from_requests(requests[n // 2 - 1:])))  # one record again: a re-dispatch
    one.close()
    many.close()
    files_one = sorted(p.read_bytes() for p in (tmp_path / "one").iterdir())
    files_many = sorted(p.read_bytes() for p in (tmp_path / "many").iterdir())
    assert files_one == files_many
