"""A query's pages over the index files (``mqstore.engine.keyindex.pages.select_pages``: a round of a probe, one
kernel call a file for every key) held to the file-by-file walk it replaced (``tests/oracle/keyindex.py``
``select_pages``): the same offsets and the same cursors, for pages that go on from cursors, over many
tiny files with colliding keys ("Aa" and "BB"), time windows that skip files or stop the walk, counts
from 0 past a page, and cursors whose file retention deleted."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine.keyindex.keys import index_hashes, index_key
from mqstore.engine.keyindex.pages import IndexCursor, select_pages
from mqstore.engine.keyindex.service import IndexService
from tests.oracle import keyindex as oracle

T0 = 1_700_000_000_000
KEYS = ["Aa", "BB", "k1", "k2", "none"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3000), st.lists(st.sampled_from(KEYS[:4]), min_size=1, max_size=3)),
                min_size=1, max_size=40),
       st.integers(1, 5), st.integers(2, 6), st.data())
def test_pages_walk_the_files_as_the_walk_they_replaced(puts: list[tuple[int, list[str]]], slot_count: int,
                                                        entry_count: int, data: st.DataObject) -> None:
    now = [T0]
    with tempfile.TemporaryDirectory() as work:
        svc = IndexService.open(Path(work) / "index", slot_count, entry_count, lambda: now[0])
        try:
            for i, (advance_ms, keys) in enumerate(puts):
                now[0] += advance_ms
                svc.build("T", keys, None, i * 10, now[0], 0)
            if data.draw(st.booleans()) and len(svc.files) > 2:
                svc.delete_before(svc.files[1].begin_phys_offset + 1)
            files = svc.files[::-1]
            keys = data.draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=6))
            hashes = index_hashes([index_key("T", key) for key in keys])
            window = data.draw(st.sampled_from([(0, 1 << 62), (T0 + 2000, now[0]), (T0, T0 + 5000),
                                                (now[0] + 1, 1 << 62)]))
            after: list[IndexCursor | None] = [None] * len(keys)
            for _ in range(3):  # a page, then the next ones from its cursors
                wants = data.draw(st.lists(st.integers(0, 4), min_size=len(keys), max_size=len(keys)))
                got = select_pages(files, hashes, wants, after, *window)
                assert got == oracle.select_pages(files, hashes, wants, after, *window)
                after = list(got.next_pages)
            stale = IndexCursor("20000101000000000", 3)  # older than every file: nothing is left to walk
            assert select_pages(files, hashes, [2] * len(keys), [stale] * len(keys), *window) == \
                oracle.select_pages(files, hashes, [2] * len(keys), [stale] * len(keys), *window)
        finally:
            svc.close()
