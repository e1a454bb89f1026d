"""A key query in a fixed number of kernel calls a round (``mqstore.engine.read.lookup.query_keys``: the index probed
for every key at once, every candidate compared with its key in one call, the answer gathered in one)
held to the Python it replaced (``tests/oracle/lookup.py``: pages a key, a comparison a candidate), on
real stores: keys on many records, twice in one record's KEYS, colliding ("Aa" and "BB" share a Java
hash, inside longer keys too), in two topics, over several tiny index and commitlog files, with time
bounds, ``max_count`` from 0 past a page, UNIQ_KEY lookups and a readable end that cuts records."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine import Message, MessageStore
from mqstore.engine.config import StoreConfig
from mqstore.engine.read.lookup import query_by_keys, query_keys
from tests.conftest import TINY, FakeClock
from tests.oracle import lookup as oracle

WORDS = ["Aa", "BB", "xAay", "xBBy", "k", "k1", "ключ", ""]
TOPICS = ["T", "U"]

record_keys = st.lists(st.sampled_from(WORDS), max_size=3)
batches = st.lists(st.tuples(st.integers(0, 4000), st.lists(st.tuples(st.sampled_from(TOPICS), record_keys),
                                                            min_size=1, max_size=12)), min_size=1, max_size=8)


def _fill(store: MessageStore, clock: FakeClock, spec: list[tuple[int, list[tuple[str, list[str]]]]]
          ) -> tuple[list[str], list[int]]:
    """The batches put, time moving on before each: the UNIQ_KEYs given and where each record starts."""
    uniq: list[str] = []
    starts: list[int] = []
    for advance_ms, records in spec:
        clock.advance(advance_ms)
        for result in store.put_batch([Message(topic, b"b", keys=tuple(keys)) for topic, keys in records]):
            assert result.ok
            uniq.append(result.uniq_key or "")
            starts.append(result.phys_offset)
    return uniq, starts


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.data())
def test_a_key_query_answers_what_the_python_it_replaced_does(spec: list[tuple[int, list[tuple[str, list[str]]]]],
                                                               data: st.DataObject) -> None:
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as work:
        store = MessageStore.open(Path(work) / "store", StoreConfig(geometry=TINY), now_ms=clock)
        try:
            uniq, starts = _fill(store, clock, spec)
            index, log = store.index, store.commitlog
            assert index is not None
            by_uniq = data.draw(st.booleans())
            words = uniq if by_uniq else [*WORDS, "missing"]
            keys = data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=12))
            topic = data.draw(st.sampled_from(TOPICS))
            max_count = data.draw(st.sampled_from([0, 1, 2, 3, 5, 70]))
            first_ms, now = 1_700_000_000_000, clock.now
            begin_ms, end_ms = data.draw(st.sampled_from([(0, 1 << 62), (now - 3000, now), (first_ms, now - 4000),
                                                          (now + 1, 1 << 62)]))
            end = data.draw(st.sampled_from([None, log.max_offset, *starts[-3:], *(s + 7 for s in starts[-3:])]))
            got = query_keys(index, log, topic, keys, max_count, begin_ms, end_ms, uniq=by_uniq, readable_end=end)
            want = oracle.query_keys(index, log, topic, keys, max_count, begin_ms, end_ms, uniq=by_uniq,
                                     readable_end=end)
            assert got == want
            assert query_by_keys(index, log, topic, keys, max_count, begin_ms, end_ms, uniq=by_uniq,
                                 readable_end=end) == got[0].split(got[1])
        finally:
            store.close()


def test_colliding_keys_past_a_round_are_walked_until_each_has_its_records(tmp_path: Path) -> None:
    """'Aa' and 'BB' share a hash: with one record a round wanted, every 'BB' record newer than the
    newest 'Aa' takes the round's place, and the query goes on, round after round, to find it, reading
    ever older commitlog files (what the first round took is still copied from where it lies)."""
    clock = FakeClock()
    store = MessageStore.open(tmp_path / "store", StoreConfig(geometry=TINY), now_ms=clock)
    try:
        store.put_batch([Message("T", b"a", keys=("Aa",))])
        store.put_batch([Message("T", b"b", keys=("BB",)) for _ in range(120)])
        # "BB" is taken from the last commitlog file in the first round, "Aa" many rounds later from the first
        assert store.index is not None and len(store.index.files) > 1 and len(store.commitlog.queue.files) > 2
        records, counts = query_keys(store.index, store.commitlog, "T", ["Aa", "BB", "Aa"], 1, 0, 1 << 62)
        assert counts == [1, 1, 1]
        assert [r.body for r in records.records()] == [b"a", b"b", b"a"]
        assert (records, counts) == oracle.query_keys(store.index, store.commitlog, "T", ["Aa", "BB", "Aa"], 1, 0,
                                                      1 << 62)
    finally:
        store.close()
