"""Batch index puts leave the bytes key-by-key puts leave: same entries, chains, header and slots, across
slot collisions, full files and rolls, and after a re-dispatch of the record at the newest file's end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.batch.dispatch import DispatchBatch, DispatchRequest
from engine.keyindex.index_file import IndexFile
from engine.keyindex.keys import index_hashes
from engine.keyindex.service import IndexService
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
