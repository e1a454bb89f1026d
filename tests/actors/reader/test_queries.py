"""A reader's queries by key over the store as the builders left it (mqstore.actors.reader.state)."""

from __future__ import annotations

from pathlib import Path

from mqstore.actors.reader.state import PublishedStore
from mqstore.engine import Message, MessageStore, StoreConfig
from tests.conftest import TINY, FakeClock


def test_a_query_finds_what_was_indexed_though_the_reader_missed_the_arrived_notice(tmp_path: Path) -> None:
    """A reader learns readable_end from ``arrived`` notices, which the consume-queue builder sends
    only when queues grow; one dropped (a reader's SUB still joining) left readable_end short, and a
    query for a message sent just then came back empty until something else was sent (a broker test
    waited 30 s for it). Whatever the index points at is written whole, so a query reads up to it."""
    clock = FakeClock()
    store_dir = tmp_path / "store"
    with MessageStore.open(store_dir, StoreConfig(geometry=TINY), now_ms=clock) as writer:
        reader = PublishedStore(store_dir, TINY, index_enabled=True, now_ms=clock)
        try:
            reader.learn_from_files()
            writer.put_batch([Message("Orders", f"m{i}".encode(), keys=(f"k{i}",)) for i in range(5)])
            assert reader.readable_end == 0  # no notice came
            assert [r.body for r in reader.query_by_key("Orders", "k4", 1, 0, 1 << 62)] == [b"m4"]
            answers = reader.query_by_keys("Orders", ["k0", "k3", "x"], 1, 0, 1 << 62)
            assert [[r.body for r in a.records()] for a in answers] == [[b"m0"], [b"m3"], []]
        finally:
            reader.close()
