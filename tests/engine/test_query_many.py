"""Query by key for many keys at once answers what one query per key answers."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from engine import Message, MessageStore
from engine.index_file import IndexFile
from engine.jhash import index_hash
from engine.lookup import query_by_key, query_by_keys
from tests.conftest import FakeClock

OpenStore = Callable[..., MessageStore]


def _fill(store: MessageStore, clock: FakeClock) -> list[str]:
    """Keys over several tiny index files (16 slots: long chains), 'Aa' / 'BB' colliding, a key in
    two topics, some keys several times, time moving on between batches."""
    rng = random.Random(7)
    keys = [f"key-{i}" for i in range(40)] + ["Aa", "BB"]
    for batch in range(6):
        clock.advance(3000)
        store.put_batch([Message("Orders" if i % 5 else "Other", f"{batch}-{i}".encode(),
                                 keys=(rng.choice(keys), rng.choice(keys))) for i in range(20)])
    return keys + ["missing", "key-1"]


def test_many_keys_at_once_answer_what_one_key_at_a_time_does(open_store: OpenStore, clock: FakeClock) -> None:
    store = open_store()
    keys = _fill(store, clock)
    index = store.index
    assert index is not None and len(index.files) > 1
    for max_count in (1, 2, 5, 64):
        for begin_ms, end_ms in ((0, 1 << 62), (clock.now - 7000, clock.now), (clock.now - 12_000, clock.now - 5000)):
            many = query_by_keys(index, store.commitlog, "Orders", keys, max_count, begin_ms, end_ms)
            one = [query_by_key(index, store.commitlog, "Orders", k, max_count, begin_ms, end_ms) for k in keys]
            assert many == one, (max_count, begin_ms, end_ms)
    assert any(query_by_keys(index, store.commitlog, "Orders", ["Aa", "BB"], 1, 0, 1 << 62))


def test_the_batched_probe_walks_chains_as_the_single_probe_does(open_store: OpenStore, clock: FakeClock) -> None:
    """Every file, every key, several wants: the same candidates (collisions included), newest first."""
    store = open_store()
    keys = _fill(store, clock)
    assert store.index is not None
    full_keys = [f"Orders#{k}" for k in keys] + [f"Other#{k}" for k in keys]
    hashes = np.array([index_hash(k) for k in full_keys], np.int64)
    for index_file in store.index.files:
        assert isinstance(index_file, IndexFile)
        for want in (0, 1, 3, 100):
            wants = np.full(len(full_keys), want, np.int64)
            got = index_file.select_phys_offsets_many(hashes, wants, 0, 1 << 62)
            assert got == [index_file.select_phys_offsets(k, want, 0, 1 << 62) for k in full_keys]
        mixed = np.arange(len(full_keys), dtype=np.int64) % 4
        got = index_file.select_phys_offsets_many(hashes, mixed, clock.now - 9000, clock.now)
        assert got == [index_file.select_phys_offsets(k, int(w), clock.now - 9000, clock.now)
                       for k, w in zip(full_keys, mixed, strict=True)]
