"""The builders apply the frames of one poll round together: a repeat and an older frame are skipped,
a gap is read from the commitlog before the frames after it, a tick closes a gap at the end, and a
malformed frame is refused with a log line; the files end as if every frame came once, in order."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq

from mqstore.actors.builder import BuilderActor, ConsumeQueueBuilderActor, IndexBuilderActor
from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.engine.batch.dispatch import DispatchBatch, DispatchRequest
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.message import Message
from mqstore.engine.log.msgid import UniqKeyGenerator
from mqstore.engine.put.writer import CommitLogWriter
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Dispatch

GEOMETRY = {"commitlog_file_size": 4096, "cq_entries_per_file": 8, "index_slot_count": 16, "index_entry_count": 32}
NOW_MS = 1_700_000_123_456
Frame = tuple[bytes, bytes, list[memoryview]]  # as a round receives a notice (mqstore.actors.builder.Received)


class Written:
    """Batches appended to a real commitlog, each with the dispatch frame the writer would publish."""

    def __init__(self, store: Path) -> None:
        self.config = load_config(store, None, store={"geometry": GEOMETRY})
        self.commitlog = CommitLog.open(store / "commitlog", GEOMETRY["commitlog_file_size"])
        self.writer = CommitLogWriter(self.commitlog, self.config.store, {},
                                      UniqKeyGenerator(b"\x01\x02\x03\x04", 7, 9, lambda: NOW_MS))
        self.requests: list[DispatchRequest] = []

    def append(self, first: int, count: int) -> Frame:
        messages = [Message("T" if i % 3 else "Orders", b"x" * 40, keys=(f"k{i}", f"j{i}") if i % 2 else ())
                    for i in range(first, first + count)]
        outcome = self.writer.write(messages, [i % 2 for i in range(first, first + count)], NOW_MS)
        requests = outcome.requests
        self.requests.extend(requests)
        start, end = requests[0].phys_offset, requests[-1].phys_offset + requests[-1].size
        return _received(Dispatch(start, end, DispatchBatch.from_requests(requests)))

    @property
    def end(self) -> int:
        return self.requests[-1].phys_offset + self.requests[-1].size


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    context: zmq.Context[Any] = zmq.Context()
    yield context
    context.destroy(linger=0)


def _builder(cls: type[BuilderActor], written: Written, ctx: zmq.Context[Any]) -> Any:
    name = "cqbuilder" if cls is ConsumeQueueBuilderActor else "indexbuilder"
    builder = cls(Runtime(name, written.config, ctx))
    builder.applied = max(builder.resume_from(), builder.commitlog.min_offset)
    return builder


def _received(notice: Dispatch) -> Frame:
    topic, header, *parts = notice.frames()
    return bytes(topic), bytes(header), [memoryview(bytes(part)) for part in parts]


def _tick(end: int) -> Frame:
    return schema.TICK, schema.pack({"v": schema.VERSION, "end": end}), []


def _check_files(written: Written, queues: ConsumeQueueBuilderActor, index: IndexBuilderActor) -> None:
    expected: dict[tuple[str, int], list[int]] = {}
    for r in written.requests:
        expected.setdefault((r.topic, r.queue_id), []).append(r.phys_offset)
    for (topic, queue_id), offsets in expected.items():
        cq = queues.queues.get(topic, queue_id)
        assert cq is not None
        assert cq.read(0, 1000)["phys_offset"].tolist() == offsets
    _check_index(written, index)


def _check_index(written: Written, index: IndexBuilderActor) -> None:
    for r in written.requests:
        for key in (r.uniq_key or "", *r.keys):
            found = index.index.query(r.topic, key, 64, 0, NOW_MS + 1000).phys_offsets
            assert found.count(r.phys_offset) == 1, (r.topic, key)


def test_a_round_with_a_repeat_a_gap_a_malformed_frame_and_a_tick(tmp_path: Path, ctx: zmq.Context[Any],
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    written = Written(tmp_path / "store")
    frames = [written.append(10 * b, 10) for b in range(6)]
    queues = _builder(ConsumeQueueBuilderActor, written, ctx)
    index = _builder(IndexBuilderActor, written, ctx)
    try:
        for builder in (queues, index):
            assert builder._on_round([frames[0], frames[1]])
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="mqstore"):
                # a repeat, an older frame, frame 2 lost (read from the commitlog), garbage, then frame 4
                assert builder._on_round([frames[1], frames[0], frames[3], (schema.DISPATCH, b"\xc1junk", []),
                                          frames[4], frames[4]])
            assert "malformed dispatch notice" in caplog.text
            assert builder.applied == schema.unpack(frames[4][1])["to"]
            assert not builder._on_round([frames[2], frames[3]])  # all applied already
            assert builder._on_round([_tick(written.end)])  # frame 5 lost: the tick closes the gap
            assert builder.applied == written.end
        more = [written.append(60 + 5 * b, 5) for b in range(4)]
        for builder in (queues, index):
            assert builder._on_round([more[0], more[1], more[0]])  # a repeat after two pending frames
            assert builder.applied == schema.unpack(more[1][1])["to"]
            # a tick past a lost frame, then frames it covered
            assert builder._on_round([_tick(written.end), more[3], more[2]])
            assert builder.applied == written.end
        _check_files(written, queues, index)
    finally:
        queues.close()
        index.close()
        written.commitlog.close()


def test_a_round_applies_its_frames_once_together(tmp_path: Path, ctx: zmq.Context[Any]) -> None:
    """Three frames in a round go into the files as one batch, with the queue ends of all three."""
    written = Written(tmp_path / "store")
    frames = [written.append(7 * b, 7) for b in range(3)]
    queues = _builder(ConsumeQueueBuilderActor, written, ctx)
    index = _builder(IndexBuilderActor, written, ctx)
    applied: list[int] = []
    try:
        for builder in (queues, index):
            apply = builder.apply
            builder.apply = lambda batch, apply=apply: (applied.append(len(batch.rows)), apply(batch))
            assert builder._on_round(frames)
            assert builder.applied == written.end
        assert applied == [21, 21]
        ends = {(topic, queue_id): end for topic, queue_id, end in queues.notice().queues}
        assert ends == {(r.topic, r.queue_id): r.queue_offset + 1 for r in written.requests}
        _check_files(written, queues, index)
    finally:
        queues.close()
        index.close()
        written.commitlog.close()


def test_a_dispatch_frame_with_keys_that_are_not_strings_is_refused(tmp_path: Path, ctx: zmq.Context[Any],
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """It used to reach the index builder's apply and raise there (``split`` of an int), outside the
    guard that refuses malformed frames, and take the builder down. Keys are key text now: text that
    is not UTF-8 is what is not strings."""
    written = Written(tmp_path / "store")
    frame = written.append(0, 4)
    topic, header, (columns, text, bounds) = frame
    index = _builder(IndexBuilderActor, written, ctx)
    try:
        with caplog.at_level(logging.WARNING, logger="mqstore"):
            assert not index._on_round([(topic, header, [columns, memoryview(b"\xff" * len(text)), bounds])])
        assert "malformed dispatch notice" in caplog.text
        assert index.applied == 0
        assert index._on_round([frame])
        _check_index(written, index)
    finally:
        index.close()
        written.commitlog.close()



def test_a_round_of_one_batch_applies_the_frames_received_without_a_copy(tmp_path: Path,
                                                                          ctx: zmq.Context[Any]) -> None:
    """The batch a builder applies is a view of the frame ZeroMQ received, and the consume-queue builder,
    which reads no keys, gets a batch without them (never checked, never joined), rounds of many too."""
    written = Written(tmp_path / "store")
    frames = [written.append(5 * b, 5) for b in range(3)]
    queues = _builder(ConsumeQueueBuilderActor, written, ctx)
    index = _builder(IndexBuilderActor, written, ctx)
    seen: list[tuple[str, Any]] = []
    try:
        for name, builder in (("queues", queues), ("index", index)):
            apply = builder.apply
            builder.apply = lambda batch, apply=apply, name=name: (seen.append((name, batch)), apply(batch))
            assert builder._on_round([frames[0]])
            assert builder._on_round(frames[1:])
        (_, one), (_, two), (_, index_one), (_, index_two) = seen
        assert np.shares_memory(one.rows, np.frombuffer(frames[0][2][0], np.uint8))
        assert np.shares_memory(index_one.rows, np.frombuffer(frames[0][2][0], np.uint8))
        assert one.keys is None and two.keys is None and len(two.rows) == 10
        assert index_one.keys is not None and index_two.keys is not None
        _check_files(written, queues, index)
    finally:
        queues.close()
        index.close()
        written.commitlog.close()


def test_a_round_gathers_the_frames_waiting_and_those_arriving_within_its_window(ctx: zmq.Context[Any]) -> None:
    """Fewer, larger rounds under load: a round takes every frame already waiting, and with
    ``index_round_ms`` (the index builder's) the frames that come within that long of its first."""
    from mqstore.actors.builder import _gather_round

    pull = ctx.socket(zmq.PULL)
    push = ctx.socket(zmq.PUSH)
    pull.bind("inproc://round")
    push.connect("inproc://round")
    try:
        for i in range(3):
            push.send_multipart([schema.DISPATCH, b"frame %d" % i])
        push.send_multipart([schema.DISPATCH])  # a lone topic: no notice, skipped
        push.send_multipart([schema.DISPATCH, b"head", b"part 1", b"part 2"])
        assert pull.poll(10_000)
        round_frames = _gather_round(pull, 0)
        assert [frame for _, frame, _ in round_frames] == [b"frame 0", b"frame 1", b"frame 2", b"head"]
        assert [bytes(part) for part in round_frames[-1][2]] == [b"part 1", b"part 2"]
        push.send_multipart([schema.DISPATCH, b"first"])
        assert pull.poll(10_000)
        sender = threading.Thread(target=lambda: push.send_multipart([schema.TICK, b"later"]))
        sender.start()  # sent while the round waits (a 2 s window: its end, not a race, ends the call)
        try:
            assert [frame for _, frame, _ in _gather_round(pull, 2_000)] == [b"first", b"later"]
        finally:
            sender.join()
    finally:
        push.close(linger=0)
        pull.close(linger=0)


def test_the_index_builder_rests_between_rounds_only_while_frames_come_often(tmp_path: Path,
                                                                             ctx: zmq.Context[Any]) -> None:
    """Frames that come within ``index_round_ms`` of the last round (a steady rate of single frames,
    one synchronous send after another) or queue (a round of several) wait unread until that long
    after the last round began, and are taken in one round: one wake-up a window, not one a frame.
    Frames that come seldom wait for nothing, and the consume-queue builder (on every consumer's
    path) never rests."""
    written = Written(tmp_path / "store")
    index = _builder(IndexBuilderActor, written, ctx)
    queues = _builder(ConsumeQueueBuilderActor, written, ctx)
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.bind("inproc://index-round")
    push.connect("inproc://index-round")
    try:
        round_ms = written.config.broker.index_round_ms
        assert round_ms > 1
        push.send_multipart([schema.TICK, b"lone"])
        assert pull.poll(10_000)
        assert [frame for _, frame, _ in index.gather(pull)] == [b"lone"]  # no window: what waits
        index.round_started(1_000)  # (a gather starts a round at the clock's time)
        index.round_started(1_000 + 10 * round_ms)  # seldom
        assert index.rest_ms(1_000 + 10 * round_ms) == 0
        index.round_started(1_000 + 11 * round_ms - 1)  # within one of the last: often
        start = 1_000 + 11 * round_ms - 1
        assert [index.rest_ms(start + t) for t in (0, 1, round_ms, round_ms + 7)] == [round_ms, round_ms - 1, 0, 0]
        for i in range(3):  # inproc: each is in the pipe once its send returns
            push.send_multipart([schema.TICK, b"queued %d" % i])
        assert pull.poll(10_000)
        assert len(index.gather(pull)) == 3
        index.round_started(start)
        index.round_started(start + 50 * round_ms)  # seldom, but the last round found frames queued
        assert index.rest_ms(start + 50 * round_ms) == round_ms
        push.send_multipart([schema.TICK, b"lone again"])
        assert pull.poll(10_000)
        assert len(index.gather(pull)) == 1
        index.round_started(start + 50 * round_ms)  # (a gather starts a round at the clock's time)
        index.round_started(start + 100 * round_ms)
        assert index.rest_ms(start + 100 * round_ms) == 0
        queues.round_started(1_000)
        queues.round_started(1_001)
        assert queues.rest_ms(1_001) == 0 and queues.round_ms() == index.round_ms() == 0
    finally:
        push.close(linger=0)
        pull.close(linger=0)
        index.close()
        queues.close()
        written.commitlog.close()


def test_notices_are_numbered_per_builder_process(tmp_path: Path, ctx: zmq.Context[Any]) -> None:
    """The flush service tells a lost notice or a restarted builder by the numbers (epoch, seq)."""
    from mqstore.ipc.wire.notices import Chain

    written = Written(tmp_path / "store")
    frames = [written.append(10 * b, 10) for b in range(2)]
    for cls in (ConsumeQueueBuilderActor, IndexBuilderActor):
        first, restarted = _builder(cls, written, ctx), _builder(cls, written, ctx)
        try:
            chain = Chain()
            assert first._on_round([frames[0]])
            assert not chain.follows(*_numbers(first))
            assert first._on_round([frames[1]])
            assert chain.follows(*_numbers(first))
            assert not chain.follows(*_numbers(restarted))  # its predecessor's last entries were never named
            assert chain.follows(*_numbers(restarted))
        finally:
            first.close()
            restarted.close()
    written.commitlog.close()


def _numbers(builder: BuilderActor) -> tuple[int, int]:
    notice = builder.notice()
    return notice.epoch, notice.seq
