"""The readers' part of the operator's commands (mqstore.actors.reader.administration): a topic's
sizes, deleting a group (its offsets and its ack-mode indexes, durably, never while it is live) and an
ack-mode group's counts, over a tiny store the engine wrote in tmp_path; no process started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.actors.reader.actor import ReaderActor
from mqstore.engine.ackindex.low_water import queue_index_keys
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.ipc.wire import receipts, requests
from tests.actors.reader.test_actor import COUNT, ask, make_reader, ok


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[ReaderActor]:
    actor = make_reader(tmp_path)
    try:
        yield actor
    finally:
        actor.store.close()
        actor.rt.close()


def _on_disk(reader: ReaderActor) -> ConsumerOffsets:
    return ConsumerOffsets.load(reader.store_dir / CONSUMER_OFFSET_FILE, lambda: 0)


def test_topic_stats_count_each_queues_bytes_as_its_records_take_them(reader: ReaderActor) -> None:
    pulled = ok(reader, requests.Pull(None, "Orders", 0, 0, max_count=COUNT))["msgs"]
    assert ok(reader, requests.TopicStats("Orders"))["queues"] == {"0": [0, COUNT, sum(m["size"] for m in pulled)]}
    assert ok(reader, requests.TopicStats("Nothing"))["queues"] == {}


def test_deleting_a_group_removes_its_offsets_and_ack_indexes_durably(reader: ReaderActor) -> None:
    ok(reader, requests.CommitOffset("g", "Orders", 0, 4, admin=True))  # not a consumer: the group is not live
    reader.offsets.persist(final=True)
    taken = ok(reader, requests.AckPull("g", "Orders", 0, "c1", max_count=2))["msgs"]
    ok(reader, requests.Ack((receipts.Receipt("g", "Orders", 0, taken[0]["seq"]).to_wire(),)))
    ok(reader, requests.CommitOffset("other", "Orders", 0, 1, admin=True))
    assert queue_index_keys(reader.store_dir) == [("g", "Orders", 0)]

    refused = ask(reader, requests.DeleteGroup("g", 60_000))  # its ack consumer was served just now
    assert refused is not None and refused["status"] == "NON_EMPTY_GROUP" and "live consumers" in refused["reason"]
    assert _on_disk(reader).topics_of("g") == ["Orders"] and queue_index_keys(reader.store_dir)

    done = ok(reader, requests.DeleteGroup("g", 0))
    assert (done["offsets"], done["ack_queues"]) == (["Orders"], [["Orders", 0]])
    assert _on_disk(reader).topics_of("g") == [] and _on_disk(reader).topics_of("other") == ["Orders"]
    assert not (reader.store_dir / "queueindex" / "g").exists() and queue_index_keys(reader.store_dir) == []
    assert ok(reader, requests.AckGroupStats("g"))["queues"] == []
    again = ok(reader, requests.AckPull("g", "Orders", 0, "c2", max_count=COUNT))["msgs"]
    assert [m["seq"] for m in again] == list(range(COUNT))  # a group of that name starts afresh
    assert not any(m["redelivered"] for m in again)


def test_an_ack_group_waiting_in_a_pull_is_live(reader: ReaderActor) -> None:
    ok(reader, requests.AckPull("g", "Orders", 0, "c1", max_count=COUNT))
    assert ask(reader, requests.AckPull("g", "Orders", 0, "c1", wait_ms=10_000)) is None  # parked: nothing left
    refused = ask(reader, requests.DeleteGroup("g", 0))
    assert refused is not None and refused["status"] == "NON_EMPTY_GROUP" and "waits" in refused["reason"]


def test_ack_group_stats_count_a_queue_not_open_and_leave_it_closed(reader: ReaderActor) -> None:
    taken = ok(reader, requests.AckPull("g", "Orders", 0, "c1", max_count=3))["msgs"]
    ok(reader, requests.Ack((receipts.Receipt("g", "Orders", 0, taken[0]["seq"]).to_wire(),)))
    (open_stats,) = ok(reader, requests.AckGroupStats("g"))["queues"]
    assert (open_stats["ready"], open_stats["unacked"]) == (COUNT - 3, 2)
    reader.acks.queues.close()  # as after a restart: the two unacked come back to be redelivered
    (closed,) = ok(reader, requests.AckGroupStats("g"))["queues"]
    assert (closed["group"], closed["topic"], closed["queue"]) == ("g", "Orders", 0)
    assert (closed["ready"], closed["unacked"], closed["dead"]) == (COUNT - 1, 0, 0)
    assert len(reader.acks.queues) == 0  # looked at, not kept open
    assert ok(reader, requests.AckGroupStats("nobody"))["queues"] == []
