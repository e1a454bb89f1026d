"""A spanning ack pull (``ack_pull_queues``) inside one reader, on a real store and real queue
indexes, with the reader's clock in the test's hands: what a request costs a queue that has nothing,
and that skipping such a queue changes nothing an ``ack_pull`` would have delivered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.reader.ack_groups import AckGroups
from mqstore.actors.reader.long_poll import RECHECK_PARKED_MS
from mqstore.actors.reader.state import PublishedStore
from mqstore.engine import Geometry, MessageStore, StoreConfig
from mqstore.engine.log.message import Message
from mqstore.ipc.wire import requests

GEOMETRY = Geometry(commitlog_file_size=256 * 1024, cq_entries_per_file=1024, index_slot_count=16,
                    index_entry_count=64)
QUEUES = (0, 1, 2, 3)


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    context: zmq.Context[Any] = zmq.Context()
    yield context
    context.term()


class Reader:
    """One reader's ack mode over ``store_dir``, its clock ``now``; ``put`` writes as the writer and
    builder would, telling the reader nothing (as a dropped ``arrived`` notice)."""

    def __init__(self, store_dir: Path, ctx: zmq.Context[Any]) -> None:
        self.store_dir = store_dir
        self.now = 1_000
        config = load_config(store_dir)
        published = PublishedStore(store_dir, GEOMETRY, index_enabled=False, now_ms=lambda: self.now)
        self.groups = AckGroups(config, 0, published, ctx=ctx, ingress=config.endpoints.ingress,
                                now_ms=lambda: self.now)

    def put(self, queue_id: int, count: int = 1) -> None:
        with MessageStore.open(self.store_dir, StoreConfig(geometry=GEOMETRY)) as store:
            store.put_batch([Message("T", b"m") for _ in range(count)], queue_id)

    def due_again(self, queue_id: int) -> None:
        """The clock moved to the queue's next redelivery, and the reader's housekeeping run."""
        q = self.groups.queues.opened(("G", "T", queue_id))
        assert q is not None
        retry_ms = q.next_retry_ms()
        assert retry_ms is not None
        self.now = max(self.now, retry_ms)
        self.groups.tick(self.now)

    def pull(self, visibility_ms: int | None = None) -> list[tuple[int, int, bool]]:
        """A spanning pull of every queue that does not wait: (queue, seq, redelivered) of each delivery."""
        reply = self.groups.spans.op_ack_pull_queues(b"c", 1, requests.AckPullQueues(
            "G", "T", QUEUES, "c1", wait_ms=0, visibility_ms=visibility_ms))
        assert reply is not None and reply["ok"], reply
        return sorted((m["queue"], m["seq"], m["redelivered"]) for m in reply["msgs"])


@pytest.fixture
def reader(tmp_path: Path, ctx: zmq.Context[Any]) -> Iterator[Reader]:
    store_dir = tmp_path / "store"
    MessageStore.open(store_dir, StoreConfig(geometry=GEOMETRY)).close()
    r = Reader(store_dir, ctx)
    for queue_id in QUEUES:
        r.put(queue_id)
    yield r
    r.groups.close()


def test_a_spanning_pull_does_not_serve_or_reread_queues_that_have_nothing(reader: Reader,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """At a low rate only one queue of a spanning pull has a message at a time, yet every request ran
    each named queue through the whole ack-pull serve and read its files again: the reader spent more
    per message than it did on one pull per queue. A queue whose memory says it has nothing is now
    skipped, its files read again at most every RECHECK_PARKED_MS."""
    assert reader.pull() == [(q, 0, False) for q in QUEUES]
    served: list[int] = []
    rechecked: list[int] = []
    serve, recheck = reader.groups.serve, reader.groups.store.recheck
    monkeypatch.setattr(reader.groups, "serve", lambda pull, now, **kw: served.append(pull.queue_id) or serve(
        pull, now, **kw))
    monkeypatch.setattr(reader.groups.store, "recheck", lambda topic, queue_id: rechecked.append(queue_id) or recheck(
        topic, queue_id))
    reader.now += 1
    assert reader.pull() == []
    assert served == [] and rechecked == []


def test_a_message_no_notice_told_of_is_found_by_a_spanning_pull_within_the_recheck(reader: Reader) -> None:
    assert len(reader.pull()) == len(QUEUES)
    reader.put(2)  # no arrived notice reaches the reader
    reader.now += 1
    first = reader.pull()
    reader.now += RECHECK_PARKED_MS
    assert first + reader.pull() == [(2, 1, False)]


def test_a_quiet_queue_past_a_visibility_deadline_redelivers_through_a_spanning_pull(reader: Reader) -> None:
    assert len(reader.pull(visibility_ms=1_000)) == len(QUEUES)
    reader.now += 999
    assert reader.pull() == []
    reader.now += 1
    assert reader.pull() == []  # each taken back, due again after its redelivery delay
    reader.due_again(1)
    assert reader.pull() == [(q, 0, True) for q in QUEUES]


def test_a_nacked_message_of_a_quiet_queue_comes_back_through_a_spanning_pull(reader: Reader) -> None:
    assert len(reader.pull()) == len(QUEUES)
    reader.now += 1
    assert reader.pull() == []
    reply = reader.groups.op_nack(b"c", 2, requests.Nack((["G", "T", 1, 0],), requeue=True))
    assert reply["ok"], reply
    reader.due_again(1)
    assert reader.pull() == [(1, 0, True)]
