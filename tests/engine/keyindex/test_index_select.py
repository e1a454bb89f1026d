"""The index probes of a key query (``buckets.select``, one kernel call a file) held to the numpy and
Python walks they replaced (``tests/oracle/keyindex.py``): the same offsets, the same entry to read
next, on files written by puts (collisions, chains across files, pages) and on hostile bytes (cycles,
chains going up, entry numbers past the file, negative time diffs)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.keyindex import buckets
from mqstore.engine.keyindex.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE
from mqstore.engine.keyindex.keys import index_hash, index_key
from mqstore.engine.keyindex.service import IndexService
from tests.oracle import keyindex as oracle

settings_ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MS = 1_700_000_000_000


def _views(raw: bytes, slot_count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    buf = bytearray(raw)
    entries_pos = 40 + 4 * slot_count
    return (np.frombuffer(buf, INDEX_HEADER_DTYPE, 1), np.frombuffer(buf, ">i4", slot_count, 40),
            np.frombuffer(buf, INDEX_ENTRY_DTYPE, (len(buf) - entries_pos) // 20, entries_pos))


def _oracle(views: tuple[np.ndarray, np.ndarray, np.ndarray], hashes: list[int], wants: list[int], begin_ms: int,
            end_ms: int, from_nos: list[int]) -> tuple[list[list[int]], list[int]]:
    found, next_nos = oracle.select(*views, np.asarray(hashes, np.int64), np.asarray(wants, np.int64), begin_ms,
                                    end_ms, np.asarray(from_nos, np.int64))
    return found, next_nos.tolist()


@settings_
@given(slot_count=st.integers(1, 6), entry_count=st.integers(1, 12), data=st.data(),
       window=st.sampled_from([(0, 1 << 62), (MS, MS + 5000), (MS + 3000, MS + 3000), (1 << 40, 0)]))
def test_probes_of_hostile_bytes_answer_what_the_oracle_does(slot_count: int, entry_count: int, data: st.DataObject,
                                                            window: tuple[int, int]) -> None:
    small = st.integers(-2, entry_count + 2)
    head = np.zeros(1, INDEX_HEADER_DTYPE)
    head["begin_ms"] = data.draw(st.sampled_from([0, MS, -MS]))
    head["index_count"] = data.draw(small)
    slots = np.asarray(data.draw(st.lists(small, min_size=slot_count, max_size=slot_count)), ">i4")
    entries = np.zeros(entry_count, INDEX_ENTRY_DTYPE)
    entries["key_hash"] = data.draw(st.lists(st.integers(0, 3), min_size=entry_count, max_size=entry_count))
    entries["phys_offset"] = np.arange(entry_count) * 100
    entries["time_diff_s"] = data.draw(st.lists(st.integers(-1, 6), min_size=entry_count, max_size=entry_count))
    entries["prev_index"] = data.draw(st.lists(small, min_size=entry_count, max_size=entry_count))
    views = _views(head.tobytes() + slots.tobytes() + entries.tobytes(), slot_count)
    keys = data.draw(st.lists(st.tuples(st.integers(0, 4), st.integers(-1, 5), small), max_size=6))
    hashes, wants, from_nos = ([k[i] for k in keys] for i in range(3))
    got = buckets.select(*views, hashes, wants, *window, from_nos)
    assert got == _oracle(views, hashes, wants, *window, from_nos)
    for h, w, f in keys:  # and one key a call, as the oracle's entry-by-entry walk answers it
        found, next_no = oracle.select_one(*views, h, w, *window, f)
        assert buckets.select(*views, [h], [w], *window, [f]) == ([found], [next_no])
    _probe_answers_as_select(views, hashes, [max(w, 0) for w in wants], [max(f, 0) for f in from_nos], window)


def _probe_answers_as_select(views: tuple[np.ndarray, np.ndarray, np.ndarray], hashes: list[int], wants: list[int],
                             from_nos: list[int], window: tuple[int, int]) -> None:
    """``buckets.probe`` (a key query's walk, flat columns) takes the offsets the oracle's walk does for
    every key wanting some, in order, and places each where the walk goes on."""
    found, next_nos = _oracle(views, hashes, wants, *window, from_nos)
    left, places, starts = np.asarray(wants, np.int64), np.zeros(len(wants), np.int64), np.asarray(from_nos, np.int64)
    cand_keys, cand_phys = np.empty(sum(wants), np.int64), np.empty(sum(wants), np.int64)
    count, wanting = buckets.probe(*views, 0, 1, True, False, *window, np.asarray(hashes, np.int64), left, places,
                                   starts, cand_keys, cand_phys, 0)
    walked = [i for i, want in enumerate(wants) if want > 0]
    assert [cand_phys[:count][cand_keys[:count] == i].tolist() for i in walked] == [found[i] for i in walked]
    assert [(places[i], starts[i], left[i]) for i in walked] == [
        (0, next_nos[i], 0) if next_nos[i] else (1, 0, wants[i] - len(found[i])) for i in walked]
    assert wanting == sum(left > 0) and set(cand_keys[:count].tolist()) <= set(walked)
    # a Java hash is read as its index_hash: -h as h (the index's hashes are never negative)
    again = np.empty(sum(wants), np.int64)
    assert buckets.probe(*views, 0, 1, True, False, *window, -np.asarray(hashes, np.int64), np.asarray(wants, np.int64),
                         np.zeros(len(wants), np.int64), np.asarray(from_nos, np.int64), np.empty(sum(wants), np.int64),
                         again, 0)[0] == count and again[:count].tolist() == cand_phys[:count].tolist()


def test_the_probe_refuses_what_does_not_fit() -> None:
    views = _views(bytes(40 + 4 * 2 + 20 * 3), 2)
    one, none = np.ones(1, np.int64), np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="no room"):
        buckets.probe(*views, 0, 1, True, False, 0, 1, one, one.copy(), none.copy(), none.copy(), none.copy()[:0],
                      none.copy()[:0], 0)
    with pytest.raises(ValueError, match="differ in length"):
        buckets.probe(*views, 0, 1, True, False, 0, 1, one, np.ones(2, np.int64), none.copy(), none.copy(),
                      none.copy(), none.copy(), 0)
    with pytest.raises(ValueError, match="wants -1"):
        buckets.probe(*views, 0, 1, True, False, 0, 1, one, -one, none.copy(), none.copy(), none.copy(), none.copy(), 0)
    with pytest.raises(ValueError, match="file 1 of 1"):
        buckets.probe(*views, 1, 1, True, False, 0, 1, one, one.copy(), none.copy(), none.copy(), none.copy(),
                      none.copy(), 0)
    with pytest.raises(ValueError, match="not an index file"):
        buckets.probe(views[0], views[1][:0], views[2], 0, 1, True, False, 0, 1, one, one.copy(), none.copy(),
                      none.copy(), none.copy(), none.copy(), 0)


@settings_
@given(keys=st.lists(st.integers(0, 40), min_size=1, max_size=60), slot_count=st.integers(1, 7),
       entry_count=st.integers(3, 9), page=st.integers(1, 4))
def test_paged_queries_over_files_answer_what_the_oracle_does(tmp_path_factory: pytest.TempPathFactory,
                                                             keys: list[int], slot_count: int, entry_count: int,
                                                             page: int) -> None:
    """Keys put through the service roll files (a key's chain goes on in the next file); every key is
    paged through every file with the kernel and again with the oracle: the same pages, cursor by cursor."""
    root = tmp_path_factory.mktemp("idx")
    clock = iter(range(MS, MS + 10_000_000, 700))
    service = IndexService.open(root, slot_count, entry_count, lambda: next(clock))
    try:
        for i, key in enumerate(keys):
            service.build("T", [f"k{key}"], None, 10 * i, next(clock), 0)
        service.flush()
        asked = [index_hash(index_key("T", f"k{key}")) for key in sorted(set(keys))] + [index_hash("none")]
        assert len(service.files) > 1 or len(keys) <= entry_count - 1  # entry 0 is never used
        for index_file in service.files:
            views = _views(index_file.path.read_bytes(), slot_count)
            cursors = [0] * len(asked)
            while True:
                got = index_file.select_page(asked, [page] * len(asked), cursors, 0, 1 << 62)
                assert got == _oracle(views, asked, [page] * len(asked), 0, 1 << 62, cursors)
                if not any(got[1]):
                    break
                cursors = got[1]
    finally:
        service.close()


def test_keys_that_are_not_three_rows_or_parts_that_are_not_an_index_file_are_refused() -> None:
    header, slots, entries = _views(bytes(40 + 4 * 4 + 20 * 8), 4)
    with pytest.raises(ValueError, match="rows of"):
        _native.index_select(header, slots, entries, np.zeros(4, np.int64), 0, 1)
    with pytest.raises(ValueError, match="wants"):
        _native.index_select(header, slots, entries, np.array([[1], [-1], [0]], np.int64), 0, 1)
    with pytest.raises(ValueError, match="index file"):
        _native.index_select(header[:0], slots, entries, np.zeros(3, np.int64), 0, 1)
    with pytest.raises(ValueError, match="index file"):
        _native.index_select(header, slots[:0], entries, np.zeros(3, np.int64), 0, 1)
