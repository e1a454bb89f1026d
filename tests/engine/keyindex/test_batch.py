"""Batch index puts leave the bytes key-by-key puts leave: same entries, chains, header and slots, across
slot collisions, full files and rolls, and after a re-dispatch of the record at the newest file's end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.batch.dispatch import DispatchBatch, DispatchRequest
from engine.jhash import index_hash, index_hashes
from engine.keyindex.index_file import IndexFile
from engine.keyindex.service import IndexService, index_key
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


def test_vectorised_hashes_are_the_index_hash() -> None:
    keys = ["Orders#k1", "", "a", "Topic#" + "x" * 300, "é#1", "polygenelubricants"]
    assert index_hashes(keys) == [index_hash(k) for k in keys]


def _hashed(batch: DispatchBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (batch.rows, *batch.index_keys())


def _key_strings(batch: DispatchBatch) -> tuple[list[int], list[str]]:
    """What ``build`` indexes for each record: its UNIQ_KEY, then its KEYS split on single spaces."""
    rows, names = [], []
    for row, r in enumerate(batch.requests()):
        for key in ([r.uniq_key] if r.uniq_key else []) + list(r.keys):
            rows.append(row)
            names.append(index_key(r.topic, key))
    return rows, names


_KEY_TEXT = st.text(st.sampled_from("ab #-é\U0001F600"), max_size=8)


@settings_
@given(records=st.lists(st.tuples(st.sampled_from(["T", "Orders", "Tö"]), _KEY_TEXT, _KEY_TEXT), max_size=12))
def test_batch_index_keys_are_the_index_hashes_of_topic_and_key(records: list[tuple[str, str, str]]) -> None:
    """Space runs, leading and trailing spaces, a UNIQ_KEY holding spaces (one key), empty strings,
    text outside ASCII (in keys and topics): hashed all at once, as the strings hash one by one."""
    requests = [DispatchRequest(topic, 0, 10 * i, 10, 0, 0, i, (), None, 0) for i, (topic, _, _) in enumerate(records)]
    plain = DispatchBatch.from_requests(requests)
    batch = DispatchBatch(plain.columns, plain.topics, [k for _, k, _ in records], [u for _, _, u in records])
    key_rows, key_hashes = batch.index_keys()
    rows, names = _key_strings(batch)
    assert key_rows.tolist() == rows
    assert key_hashes.tolist() == [index_hash(name) for name in names]


@pytest.mark.parametrize(("keys", "uniq"), [
    (["k1  k2 ", "", " lead", "one", "a b c", "   "], ["U 1", "", "UNIQ", "", " ", "0A1B2C3D4E5F"]),
    (["k1", "", "", "one", "abc", ""], ["U1", "", "UNIQ", "", "7", "0A1B2C3D4E5F"]),  # no key holds a space
])
def test_ascii_index_keys_hash_as_strings(keys: list[str], uniq: list[str]) -> None:
    requests = [DispatchRequest("Orders" if i % 2 else "T", i % 3, 100 * i, 100, 0, 0, i, (), None, 0)
                for i in range(6)]
    plain = DispatchBatch.from_requests(requests)
    batch = DispatchBatch(plain.columns, plain.topics, keys, uniq)
    key_rows, key_hashes = batch.index_keys()
    rows, names = _key_strings(batch)
    assert key_rows.tolist() == rows
    assert key_hashes.tolist() == [index_hash(name) for name in names]


@pytest.mark.parametrize("length", [8_192, 8_193, 20_000])
def test_keys_longer_than_the_power_table_hash_instead_of_raising_index_error(length: int) -> None:
    """A key (or UNIQ_KEY) past 8,192 characters made the live index builder die on IndexError; the
    properties allow keys up to their 32,767 bytes."""
    requests = [DispatchRequest("T", 0, 100 * i, 100, 0, 0, i, (), None, 0) for i in range(2)]
    plain = DispatchBatch.from_requests(requests)
    batch = DispatchBatch(plain.columns, plain.topics, ["k" * length + " b", "x" * (length - 3)], ["u" * length, ""])
    key_rows, key_hashes = batch.index_keys()
    rows, names = _key_strings(batch)
    assert key_rows.tolist() == rows == [0, 0, 0, 1]
    assert key_hashes.tolist() == [index_hash(name) for name in names]


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
