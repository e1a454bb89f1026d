"""Query by key for many keys at once answers what one query per key answers."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from mqstore.engine import Message, MessageStore, Record
from mqstore.engine.keyindex.index_file import IndexFile
from mqstore.engine.keyindex.keys import index_hash
from mqstore.engine.read.lookup import query_by_key, query_by_keys
from tests.conftest import FakeClock

OpenStore = Callable[..., MessageStore]


def _fill(store: MessageStore, clock: FakeClock) -> list[str]:
    """Keys over several tiny index files (16 slots: long chains), 'Aa' / 'BB' colliding, a key in
    two topics, some keys several times, time moving on between batches."""
    rng = random.Random(7)
    keys = [f"key-{i}" for i in range(40)] + ["Aa", "BB", "ключ-7"]
    for batch in range(6):
        clock.advance(3000)
        store.put_batch([Message("Orders" if i % 5 else "Other", f"{batch}-{i}".encode(),
                                 keys=(rng.choice(keys), rng.choice(keys))) for i in range(20)])
    return [*keys, "missing", "key-1"]


def test_many_keys_at_once_answer_what_one_key_at_a_time_does(open_store: OpenStore, clock: FakeClock) -> None:
    store = open_store()
    keys = _fill(store, clock)
    index = store.index
    assert index is not None and len(index.files) > 1
    for max_count in (1, 2, 5, 64):
        for begin_ms, end_ms in ((0, 1 << 62), (clock.now - 7000, clock.now), (clock.now - 12_000, clock.now - 5000)):
            many = query_by_keys(index, store.commitlog, "Orders", keys, max_count, begin_ms, end_ms)
            one = [query_by_keys(index, store.commitlog, "Orders", [k], max_count, begin_ms, end_ms)[0] for k in keys]
            assert many == one, (max_count, begin_ms, end_ms)
            for key, stored in zip(keys, many, strict=True):
                assert stored.records() == _decoded_query(store, key, max_count, begin_ms, end_ms)
                assert stored.data == b"".join(store.commitlog.read_bytes(p, n) or b""
                                               for p, n in zip(stored.phys_offsets, stored.sizes, strict=True))
    assert all(len(s) for s in query_by_keys(index, store.commitlog, "Orders", ["Aa", "BB"], 1, 0, 1 << 62))
    uniq = store.put(Message("Orders", b"u")).uniq_key
    assert uniq and query_by_key(index, store.commitlog, "Orders", uniq, 4, 0, 1 << 62, uniq=True)[0].body == b"u"
    assert query_by_key(index, store.commitlog, "Orders", uniq, 4, 0, 1 << 62) == []


def _decoded_query(store: MessageStore, key: str, max_count: int, begin_ms: int, end_ms: int) -> list[Record]:
    """What the query means, the slow way: every record of the topic decoded, newest max_count kept."""
    index = store.index
    assert index is not None
    found = []
    for cq in store.queues:
        if cq.topic != "Orders":
            continue
        for phys_offset, size, _ in cq.read(0, cq.max_queue_offset).tolist():
            record = store.commitlog.read_record(phys_offset).record
            assert record is not None and record.size == size
            stamp = next(f for f in index.files if f.begin_phys_offset <= phys_offset <= f.end_phys_offset)
            seconds = (record.store_ms - stamp.begin_ms) // 1000 * 1000 + stamp.begin_ms
            if key in record.keys and begin_ms <= seconds <= end_ms:
                found.append(record)
    return sorted(sorted(found, key=lambda r: -r.phys_offset)[:max_count], key=lambda r: r.phys_offset)


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
        _, from_nos = index_file.select_page(hashes.tolist(), mixed.tolist(), [0] * len(hashes), 0, 1 << 62)
        going = [(h, n) for h, n in zip(hashes.tolist(), from_nos, strict=True) if n]
        while going:  # the keys not at their chain's end, each from where it stopped, a page of 2 at a time
            ones = [index_file.select_page([h], [2], [n], 0, 1 << 62) for h, n in going]
            pages, from_nos = index_file.select_page([h for h, _ in going], [2] * len(going), [n for _, n in going],
                                                     0, 1 << 62)
            assert (pages, from_nos) == ([p[0][0] for p in ones], [p[1][0] for p in ones])
            going = [(h, n) for (h, _), n in zip(going, from_nos, strict=True) if n]
