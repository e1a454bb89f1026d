"""A reader's request handling on typed requests (mqstore.actors.reader.actor): the dispatch of pulls,
offsets and queries, and the ack-mode ops (mqstore.actors.reader.ack_groups), over a tiny store the
engine wrote in tmp_path; no process started, no socket used."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.reader.actor import ReaderActor
from mqstore.actors.runtime import Runtime
from mqstore.engine import Message, MessageStore
from mqstore.engine.meta.offsets import ConsumerOffsets
from mqstore.ipc.wire import receipts, requests, schema
from mqstore.ipc.wire.messages import MessageBatch
from mqstore.ipc.wire.notices import Arrived
from mqstore.ipc.wire.requests import Request
from tests.conftest import TINY

GEOMETRY = {"commitlog_file_size": TINY.commitlog_file_size, "cq_entries_per_file": TINY.cq_entries_per_file,
            "index_slot_count": TINY.index_slot_count, "index_entry_count": TINY.index_entry_count}
COUNT = 6  # messages in Orders' queue 0: tags a, b, a, b, ...; key k{i}


def make_reader(tmp_path: Path, **broker: Any) -> ReaderActor:
    store_dir = tmp_path / "store"
    config = load_config(store_dir, broker=broker, store={"geometry": GEOMETRY})
    if not store_dir.exists():
        with MessageStore.open(store_dir, config.store) as store:
            store.put_batch([Message("Orders", f"m{i}".encode(), tags="ab"[i % 2], keys=(f"k{i}",))
                             for i in range(COUNT)], [0] * COUNT)
    reader = ReaderActor(Runtime("reader-0", config, zmq.Context()), 0)
    reader.store.learn_from_files()
    return reader


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[ReaderActor]:
    actor = make_reader(tmp_path)
    try:
        yield actor
    finally:
        actor.store.close()
        actor.rt.close()


def ask(reader: ReaderActor, request: Request | dict[str, Any], request_id: Any = 1) -> dict[str, Any] | None:
    frame = request.frames(request_id)[0] if isinstance(request, Request) else schema.pack(request)
    return reader.handle([b"peer", bytes(frame)])


def ok(reader: ReaderActor, request: Request) -> dict[str, Any]:
    reply = ask(reader, request)
    assert reply is not None and reply["ok"], reply
    return reply


def bodies(reply: dict[str, Any]) -> list[bytes]:
    return [m.body for m in MessageBatch.from_reply(reply)]


def test_a_pull_reads_from_its_offset_with_its_tag_filter(reader: ReaderActor) -> None:
    everything = ok(reader, requests.Pull("g", "Orders", 0, 1, max_count=3, raw=True))
    assert (everything["status"], everything["next"], bodies(everything)) == ("FOUND", 4, [b"m1", b"m2", b"m3"])
    as_maps = ok(reader, requests.Pull("g", "Orders", 0, 0, tags="b"))
    assert [m["body"] for m in as_maps["msgs"]] == [b"m1", b"m3", b"m5"]
    past = ok(reader, requests.Pull("g", "Orders", 0, COUNT))
    assert (past["status"], past["msgs"]) == ("OFFSET_OVERFLOW_ONE", [])


def test_a_pull_with_nothing_new_waits_when_asked(reader: ReaderActor) -> None:
    assert ask(reader, requests.Pull("g", "Orders", 0, COUNT, wait_ms=1000)) is None
    assert len(reader.parked) == 1
    too_long = ask(reader, requests.Pull("g", "Orders", 0, COUNT, wait_ms=reader.rt.config.broker.long_poll_max_ms + 1))
    assert too_long is not None and too_long["status"] == schema.BAD_REQUEST and "'wait_ms'" in too_long["reason"]


def test_pulls_and_commits_mark_their_group_alive_but_an_admin_reset_does_not(reader: ReaderActor) -> None:
    ok(reader, requests.Pull("pulling", "Orders", 0, 0))
    ok(reader, requests.CommitOffset("committing", "Orders", 0, 2))
    ok(reader, requests.CommitOffset("resetting", "Orders", 0, 0, admin=True))
    assert set(ok(reader, requests.GroupActivity())["groups"]) == {"pulling", "committing"}


def test_offsets_committed_fetched_described_and_deleted(reader: ReaderActor) -> None:
    assert ok(reader, requests.FetchOffset("g", "Orders", 0))["offset"] == -1
    ok(reader, requests.CommitOffset("g", "Orders", 0, 4))
    assert ok(reader, requests.FetchOffset("g", "Orders", 0))["offset"] == 4
    beyond = ask(reader, requests.CommitOffset("g", "Orders", 0, COUNT + 1))
    assert beyond is not None and beyond["status"] == "OFFSET_OVERFLOW_BADLY"
    assert ok(reader, requests.Groups())["groups"] == {"g": ["Orders"]}
    (queue,) = ok(reader, requests.GroupDescribe("g"))["queues"]
    assert (queue["committed_offset"], queue["lag"]) == (4, COUNT - 4)
    assert ok(reader, requests.DeleteTopicOffsets("Orders"))["deleted"] is True
    assert ok(reader, requests.FetchOffset("g", "Orders", 0))["offset"] == -1


def test_queries_and_the_queue_info(reader: ReaderActor) -> None:
    assert ok(reader, requests.QueueInfo("Orders"))["queues"] == {"0": [0, COUNT]}
    assert bodies(ok(reader, requests.QueryKey("Orders", "k3", raw=True))) == [b"m3"]
    keyed = ok(reader, requests.QueryKeys("Orders", ("k1", "nope", "k4")))
    assert (bodies(keyed), keyed["counts"]) == ([b"m1", b"m4"], [1, 0, 1])
    found = ok(reader, requests.QueryKey("Orders", "k2"))["msgs"]
    assert [m["body"] for m in found] == [b"m2"]
    (stored,) = found
    assert ok(reader, requests.ViewId(stored["msg_id"]))["msgs"][0]["body"] == b"m2"
    assert ok(reader, requests.OffsetByTime("Orders", 0, 0))["offset"] == 0
    assert ok(reader, requests.Ping())["readable_end"] == reader.store.readable_end


@pytest.mark.parametrize(("message", "status", "named"), [
    ({"op": "pull", "topic": "Orders", "queue": 0, "offset": -1}, schema.BAD_REQUEST, "'offset' = -1 is below 0"),
    ({"op": "query_key", "topic": "Orders"}, schema.BAD_REQUEST, "missing field 'key'"),
    ({"op": "commit_offset", "group": "g", "topic": "../x", "queue": 0, "offset": 0}, schema.BAD_REQUEST, "topic"),
    ({"op": "send", "msgs": []}, schema.UNKNOWN_OP, "the reader does not serve 'send'"),
    ({"op": "ping", "id": 1.5}, schema.BAD_REQUEST, "id must be an integer or a string"),
])
def test_refusals_name_the_field(reader: ReaderActor, message: dict[str, Any], status: str, named: str) -> None:
    reply = ask(reader, {"v": 1, "id": 9, **message})
    assert reply is not None and (reply["ok"], reply["status"]) == (False, status)
    assert named in reply["reason"]


def test_ack_mode_delivers_acks_and_requeues(reader: ReaderActor) -> None:
    first = ok(reader, requests.AckPull("workers", "Orders", 0, "c1", max_count=2))["msgs"]
    assert [(m["body"], m["seq"], m["redelivered"]) for m in first] == [(b"m0", 0, False), (b"m1", 1, False)]
    receipt = receipts.Receipt("workers", "Orders", 0, 0).to_wire()
    bad = ["workers", "Orders", -1, 0]
    assert ok(reader, requests.Ack((receipt, bad)))["results"] == [receipts.OK, receipts.BAD_REQUEST]
    assert ok(reader, requests.Ack((receipt,)))["results"] == [receipts.UNKNOWN_RECEIPT]
    requeued = receipts.Receipt("workers", "Orders", 0, 1).to_wire()
    assert ok(reader, requests.Nack((requeued,)))["results"] == [receipts.OK]
    fresh = ok(reader, requests.AckPull("workers", "Orders", 0, "c1", max_count=1))["msgs"]
    assert [m["seq"] for m in fresh] == [2]  # the requeued one waits out its redelivery delay
    stats = ok(reader, requests.AckStats())["queues"]
    assert [(q["group"], q["unacked"]) for q in stats] == [("workers", 1)]
    assert ok(reader, requests.AckRelease("workers", "Orders", "c1", (0,), ((0, 2),)))["released"] == 1
    back = ok(reader, requests.AckPull("workers", "Orders", 0, "c2", max_count=1))["msgs"]
    assert [(m["seq"], m["redelivered"], m["delivery_count"]) for m in back] == [(2, True, 2)]


def test_ack_mode_refuses_what_its_configuration_bounds(reader: ReaderActor) -> None:
    most = reader.rt.config.broker.ack_prefetch
    reply = ask(reader, requests.AckPull("workers", "Orders", 0, "c1", prefetch=most + 1))
    assert reply is not None and reply["status"] == schema.BAD_REQUEST and f"'prefetch' = {most + 1}" in reply["reason"]


def test_an_ack_mode_queue_another_reader_owns_is_refused(tmp_path: Path) -> None:
    reader = make_reader(tmp_path, readers=2)
    try:
        queue = next(q for q in range(8) if receipts.ack_owner("workers", "Orders", q, 2) != 0)
        reply = ask(reader, requests.AckPull("workers", "Orders", queue, "c1"))
        assert reply is not None and reply["status"] == receipts.NOT_OWNER
        other = receipts.Receipt("workers", "Orders", queue, 0).to_wire()
        assert ok(reader, requests.Ack((other,)))["results"] == [receipts.NOT_OWNER]
    finally:
        reader.store.close()
        reader.rt.close()


def test_an_idle_reader_with_many_groups_rewrites_its_offsets_file_only_after_a_change(reader: ReaderActor) -> None:
    for g in range(200):
        ok(reader, requests.CommitOffset(f"g{g}", "Orders", 0, 1))
    reader.offsets.persist(final=False)
    path = reader.offsets.path
    written = path.stat().st_ino  # each write replaces the file whole: a new inode
    for _ in range(5):  # the persist interval passing while nothing commits
        reader.offsets.persist(final=False)
        assert path.stat().st_ino == written
    ok(reader, requests.CommitOffset("g7", "Orders", 0, 3))
    reader.offsets.persist(final=False)
    assert path.stat().st_ino != written
    assert ConsumerOffsets.load(path, lambda: 0).query("g7", "Orders", 0) == 3


def test_deliveries_are_counted_per_group_and_topic_in_either_mode(reader: ReaderActor) -> None:
    """Two groups pulling the same messages each count their own; ack mode counts what it hands out."""
    ok(reader, requests.Pull("g1", "Orders", 0, 0, max_count=4, raw=True))
    ok(reader, requests.Pull("g2", "Orders", 0, 0, max_count=2))
    ok(reader, requests.Pull("g2", "Orders", 0, 2, tags="b"))  # m3, m5
    ok(reader, requests.AckPull("workers", "Orders", 0, "c1", max_count=3))
    stats = reader.delivered.stats()
    assert stats["groups_out"] == {"g1": {"Orders": 4}, "g2": {"Orders": 4}, "workers": {"Orders": 3}}
    assert stats["topics_out"]["Orders"][0] == 4 + 4 + 3


def test_a_parked_pull_is_answered_by_the_notice_that_covers_it_after_another_pull_read_the_files(
        tmp_path: Path) -> None:
    """Group a's pull waits at the queue's end; the builder appends and, before its ``arrived`` notice
    comes, group b's pull at the same end reads the new entries off the files (which moves the queue's
    published end). The notice that then covers them grows nothing the reader did not know: it must
    still answer a's pull, which otherwise waited for a later notice, the recheck or its deadline."""
    reader = make_reader(tmp_path)
    ctx = reader.rt.ctx
    router, peer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    notices_out, arrived_in = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    try:
        router.bind("inproc://reader")
        peer.setsockopt(zmq.IDENTITY, b"a")
        peer.connect("inproc://reader")
        notices_out.bind("inproc://arrived")
        arrived_in.setsockopt(zmq.SUBSCRIBE, schema.ARRIVED)
        arrived_in.connect("inproc://arrived")
        assert ask_as(reader, b"a", requests.Pull("a", "Orders", 0, COUNT, wait_ms=20_000, raw=True)) is None
        with MessageStore.open(tmp_path / "store", reader.rt.config.store) as store:
            store.put_batch([Message("Orders", b"new")], [0])
            applied = store.commitlog.max_offset
        got = ask_as(reader, b"b", requests.Pull("b", "Orders", 0, COUNT, wait_ms=20_000, raw=True))
        assert got is not None and bodies(got) == [b"new"]
        assert len(reader.parked) == 1  # a's pull: the files were read for b's, not for it

        notice = Arrived((("Orders", 0, COUNT + 1),), applied, 0)
        while not arrived_in.poll(0):  # a PUB drops what it sends before the subscription reaches it
            notices_out.send_multipart(notice.frames())
            arrived_in.poll(10)
        reader._on_arrived(router, arrived_in)

        assert len(reader.parked) == 0
        assert peer.poll(10_000)
        reply_frame, *parts = peer.recv_multipart()  # a DEALER hears no identity frame
        reply = schema.unpack_message(reply_frame, parts)
        assert reply["ok"] and bodies(reply) == [b"new"]
    finally:
        for sock in (router, peer, notices_out, arrived_in):
            sock.close(0)
        reader.store.close()
        reader.rt.close()


def ask_as(reader: ReaderActor, identity: bytes, request: Request) -> dict[str, Any] | None:
    return reader.handle([identity, bytes(request.frames(1)[0])])
