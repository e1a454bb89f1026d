"""The index's kernels against the numpy/Python code they replaced (tests/oracle): the Java hash of
any text (non-ASCII, surrogate pairs), the index keys of many records, and the puts into one file,
byte for byte, full files, used slots and odd headers included, and the same refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.batch.key_text import KeyText
from mqstore.engine.java.jhash import java_hash, java_hashes
from mqstore.engine.keyindex import buckets
from mqstore.engine.keyindex.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE
from mqstore.engine.keyindex.keys import record_key_hashes
from tests.oracle import jhash as jhash_oracle
from tests.oracle import keyindex as oracle

INT_MAX = (1 << 31) - 1
LONG = st.integers(-(1 << 63), (1 << 63) - 1)
TEXT = st.text(st.sampled_from("aZ0 #\x00\x7f\x80é\u0100\u4e2d\uffff\U00010000\U0001F600\U0010FFFF"), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(TEXT, st.text(max_size=40)), max_size=40))
def test_java_hashes_are_the_oracles(strings: list[str]) -> None:
    assert java_hashes(strings) == jhash_oracle.java_hashes(strings) == [jhash_oracle.java_hash(s) for s in strings]
    assert [java_hash(s) for s in strings] == jhash_oracle.java_hashes(strings)


def test_a_character_outside_the_bmp_hashes_as_its_surrogate_pair_and_a_lone_surrogate_as_itself() -> None:
    assert java_hash("\U0001F600") == 31 * 0xD83D + 0xDE00
    assert java_hash("a\ud800") == 31 * ord("a") + 0xD800  # Java hashes it; the old code raised
    assert java_hash("polygenelubricants") == -(1 << 31)


def test_java_hashes_refuse_what_is_not_a_str() -> None:
    with pytest.raises((AttributeError, TypeError)):
        jhash_oracle.java_hashes(["a", b"b"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not str"):
        java_hashes(["a", b"b"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        java_hash(b"b")  # type: ignore[arg-type]


def _key_hashes(topics: list[str], codes: Any, keys: list[Any], uniq: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """``record_key_hashes`` of records given as strings, through their key text (as the wire carries them)."""
    text = KeyText.of(uniq, keys)
    return record_key_hashes(topics, codes, text.text, text.bounds)


@settings(max_examples=300, deadline=None)
@given(topics=st.lists(TEXT, min_size=1, max_size=4),
       records=st.lists(st.tuples(st.integers(0, 3), st.one_of(TEXT, st.just("")), st.one_of(TEXT, st.just(""))),
                        max_size=30))
def test_record_key_hashes_are_the_oracles(topics: list[str], records: list[tuple[int, str, str]]) -> None:
    codes = np.array([code % len(topics) for code, _, _ in records], np.int64)
    keys = [k for _, k, _ in records]
    uniq = [u for _, _, u in records]
    rows, hashes = _key_hashes(topics, codes, keys, uniq)
    want_rows, want_hashes = oracle.record_key_hashes(topics, codes, keys, uniq)
    assert rows.tolist() == want_rows.tolist() and hashes.tolist() == want_hashes.tolist()
    assert rows.dtype == hashes.dtype == np.int64


@pytest.mark.parametrize(("codes", "keys", "uniq"), [
    ([0, 2], ["a", "b"], ["", ""]),                 # a topic code past the table
    ([0, 0], ["a", 3], ["", ""]),                    # not a str
    ([0, 0], ["a", "b"], ["", None]),
])
def test_record_key_hashes_refuse_what_the_oracle_refuses(codes: list[int], keys: list[Any], uniq: list[Any]) -> None:
    topics = ["T", "U"]
    with pytest.raises((IndexError, TypeError, ValueError)):
        oracle.record_key_hashes(topics, np.array(codes), keys, uniq)
    with pytest.raises((TypeError, ValueError)):
        _key_hashes(topics, np.array(codes), keys, uniq)


def test_index_key_hashes_refuse_outputs_too_short() -> None:
    rows, hashes = np.empty(1, np.int64), np.empty(1, np.int64)
    one = KeyText.of(["u"], ["a b"])
    with pytest.raises(ValueError, match="more keys"):
        _native.index_key_hashes(["T"], np.zeros(1, np.int64), one.text, one.bounds, rows, hashes)
    with pytest.raises(ValueError, match="key bounds"):
        _native.index_key_hashes(["T"], np.zeros(2, np.int64), one.text, one.bounds, rows, hashes)
    with pytest.raises(ValueError, match="differ in length"):
        _native.index_key_hashes(["T"], np.zeros(1, np.int64), one.text, one.bounds, rows, np.empty(2, np.int64))


def _index_file(slot_count: int, entry_count: int, header: tuple[int, int, int, int, int, int],
                slot_values: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    head = np.zeros(1, INDEX_HEADER_DTYPE)
    for name, value in zip(INDEX_HEADER_DTYPE.names or (), header, strict=True):
        head[name] = value
    slots = np.array((slot_values * slot_count)[:slot_count], ">i4")
    return head, slots, np.zeros(entry_count, INDEX_ENTRY_DTYPE)


@st.composite
def put_cases(draw: st.DrawFn) -> dict[str, Any]:
    slot_count = draw(st.integers(1, 9))
    entry_count = draw(st.integers(1, 30))
    n = draw(st.integers(0, 40))
    begin_ms = draw(st.sampled_from([0, -1, 1_700_000_000_000, 1, (1 << 63) - 1]))
    header = (begin_ms, draw(LONG), draw(st.integers(0, 1 << 40)), draw(st.integers(0, 1 << 40)),
              draw(st.integers(0, 100)), draw(st.sampled_from([0, -3, 1, 2, 5, entry_count - 1, entry_count,
                                                               entry_count + 4])))
    return {
        "slot_count": slot_count, "entry_count": entry_count, "header": header,
        "slot_values": draw(st.lists(st.integers(-(1 << 31), INT_MAX), min_size=1, max_size=4)),
        "hashes": draw(st.lists(st.one_of(st.integers(0, 20), st.integers(0, INT_MAX)), min_size=n, max_size=n)),
        "phys": sorted(draw(st.lists(st.integers(0, (1 << 63) - 1), min_size=n, max_size=n))),
        "times": draw(st.lists(st.one_of(LONG, st.integers(1_699_999_000_000, 1_700_009_000_000)), min_size=n,
                               max_size=n)),
        "cuts": draw(st.lists(st.integers(1, 12), max_size=4)),
    }


@settings(max_examples=400, deadline=None)
@given(put_cases())
def test_puts_write_the_oracles_bytes(case: dict[str, Any]) -> None:
    """Batches of any cut into files of any state: the same bytes in header, slots and entries, and
    the same counts put."""
    kernel = _index_file(case["slot_count"], case["entry_count"], case["header"], case["slot_values"])
    numpy = _index_file(case["slot_count"], case["entry_count"], case["header"], case["slot_values"])
    hashes, phys, times = (np.array(case[name], np.int64) for name in ("hashes", "phys", "times"))
    done = 0
    for cut in [*case["cuts"], len(hashes)]:
        got = buckets.put(*kernel, hashes[done:done + cut], phys[done:done + cut], times[done:done + cut])
        assert got == oracle.put(*numpy, hashes[done:done + cut], phys[done:done + cut], times[done:done + cut])
        done += got
        assert [a.tobytes() for a in kernel] == [a.tobytes() for a in numpy]
        if got == 0:
            break


def test_a_put_refuses_what_the_oracle_refuses_and_writes_nothing() -> None:
    for refused in (oracle.put, buckets.put):
        header, slots, entries = _index_file(3, 8, (0, 0, 0, 0, 0, 1), [0])
        with pytest.raises(ValueError, match="phys_offset out of range: -1"):
            refused(header, slots, entries, np.array([1, 2]), np.array([5, -1]), np.array([1_000, 1_000]))
        assert not header.tobytes().strip(b"\0")[:-1] and not slots.any() and not entries.tobytes().strip(b"\0")


@pytest.mark.parametrize(("header", "slots", "entries", "hashes", "reason"), [
    (np.zeros(1, INDEX_HEADER_DTYPE), np.zeros(3, ">i4"), np.zeros(4, INDEX_ENTRY_DTYPE), [-1], "not an index hash"),
    (np.zeros(1, INDEX_HEADER_DTYPE), np.zeros(3, ">i4"), np.zeros(4, INDEX_ENTRY_DTYPE), [1 << 31], "index hash"),
    (np.zeros(2, INDEX_HEADER_DTYPE), np.zeros(3, ">i4"), np.zeros(4, INDEX_ENTRY_DTYPE), [1], "index file's"),
    (np.zeros(1, INDEX_HEADER_DTYPE), np.zeros(0, ">i4"), np.zeros(4, INDEX_ENTRY_DTYPE), [1], "index file's"),
    (np.zeros(1, INDEX_HEADER_DTYPE), np.zeros(3, ">i4"), np.zeros(7, np.uint8), [1], "index file's"),
])
def test_the_put_kernel_refuses_buffers_and_hashes_that_are_not_an_index_files(
        header: np.ndarray, slots: np.ndarray, entries: np.ndarray, hashes: list[int], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        _native.index_put(header, slots, entries, np.array(hashes, np.int64), np.zeros(1, np.int64),
                          np.zeros(1, np.int64))
    assert not slots.any()
    with pytest.raises(ValueError, match="differ in length"):
        _native.index_put(np.zeros(1, INDEX_HEADER_DTYPE), np.zeros(3, ">i4"), np.zeros(4, INDEX_ENTRY_DTYPE),
                          np.zeros(2, np.int64), np.zeros(1, np.int64), np.zeros(2, np.int64))
