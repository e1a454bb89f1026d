"""Topic watches (mqstore.actors.reader.topic_watch.TopicWatches) over a real store's files: a watch is
answered when its topic has a queue it does not know, and an ``arrived`` notice for queues every watch
knows costs no listing of the topic's queues (``queue_info``: a directory listing a call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore.actors.reader.state import PublishedStore
from mqstore.actors.reader.topic_watch import TopicWatches
from mqstore.engine import Message, MessageStore, StoreConfig
from mqstore.ipc.wire.replies import QueueInfoReply
from mqstore.ipc.wire.requests import WatchQueues
from tests.conftest import TINY, FakeClock


class Watching:
    """A reader's watches over a real store, counting the topic listings and keeping the answers."""

    def __init__(self, store_dir: Path, clock: FakeClock) -> None:
        self.store_dir = store_dir
        self.clock = clock
        self.published = PublishedStore(store_dir, TINY, index_enabled=False, now_ms=clock)
        self.published.learn_from_files()
        self.listings = 0
        listing = self.published.queue_info

        def counted(topic: str) -> dict[int, tuple[int, int]]:
            self.listings += 1
            return listing(topic)

        self.published.queue_info = counted  # type: ignore[method-assign]
        self.watches = TopicWatches(self.published, clock, long_poll_max_ms=60_000)
        self.answers: list[tuple[bytes, dict[str, Any]]] = []
        self.watches.send = lambda identity, reply: self.answers.append((identity, reply))

    def put(self, queue_id: int) -> None:
        with MessageStore.open(self.store_dir, StoreConfig(geometry=TINY), now_ms=self.clock) as writer:
            writer.put_batch([Message("Orders", b"x")], [queue_id])

    def arrived(self, queue_id: int) -> None:
        """An ``arrived`` notice for one queue of Orders, as the reader hands it on (the queues that grew)."""
        self.watches.on_grew([("Orders", queue_id)])

    def watch(self, identity: bytes, known: tuple[int, ...]) -> None:
        assert self.watches.op_watch_queues(identity, identity, WatchQueues("Orders", known, 30_000)) is None


@pytest.fixture
def watching(tmp_path: Path) -> Any:
    clock = FakeClock()
    store_dir = tmp_path / "store"
    with MessageStore.open(store_dir, StoreConfig(geometry=TINY), now_ms=clock) as writer:
        writer.put_batch([Message("Orders", b"x"), Message("Orders", b"y")], [0, 1])
    running = Watching(store_dir, clock)
    yield running
    running.published.close()


def test_arrived_notices_for_known_queues_list_nothing(watching: Watching) -> None:
    """Every notice on a watched topic listed its queue folders: ~17 % of a reader's CPU at low rates,
    for traffic on the queues the watching consumer already reads."""
    watching.watch(b"a", (0, 1))
    parked = watching.listings
    for _ in range(100):
        watching.arrived(0)
        watching.arrived(1)
    assert watching.listings == parked and watching.answers == []
    watching.put(5)  # a delayed copy landing on a queue no one knew
    watching.arrived(5)
    assert watching.listings == parked + 1
    assert [(identity, sorted(QueueInfoReply.decode(reply).queues)) for identity, reply in watching.answers
            ] == [(b"a", [0, 1, 5])]
    assert not watching.watches


def test_a_notice_answers_only_the_watches_missing_its_queue(watching: Watching) -> None:
    watching.watch(b"older", (0, 1))
    watching.put(2)  # the older watch has not seen it yet (its notice comes later)
    watching.watch(b"newer", (0, 1, 2))
    watching.arrived(0)
    assert watching.answers == []
    watching.arrived(2)  # known to one watch, not the other
    assert [identity for identity, _ in watching.answers] == [b"older"]
    listed = watching.listings
    watching.arrived(2)  # now every watch left knows it
    assert watching.listings == listed and [identity for identity, _ in watching.answers] == [b"older"]
    watching.put(3)
    watching.arrived(3)
    assert [identity for identity, _ in watching.answers] == [b"older", b"newer"] and not watching.watches
