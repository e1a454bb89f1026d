"""Progress made durable only after the data it counts, through a real broker under ASYNC_FLUSH.

The flush service here flushes only when 64 pages wait (and its thorough flush never comes), so a few
small messages stay in the page cache until a large one pushes the flush past them. A power cut in
between keeps the files the progress is in and loses the copies: the progress must not count them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.flushed import FlushedFollower
from mqstore.engine.delay.offsets import read_delay_offsets, read_reput_floor
from mqstore.engine.meta.metafile import create_abort
from mqstore.engine.timer.checkpoint import TimerCheckpoint
from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.wire.messages import ReceivedMessage
from tests.integration.broker import Broker, wait_for

LEVELS_TOML = '\n[store]\nmessage_delay_level = "1s 2s 3s"\n'
# flushed only when 64 pages (256 KiB) wait: a large send is what moves the flush
LAZY_FLUSH = "[flush]\ninterval_ms = 50\nleast_pages = 64\nthorough_interval_ms = 3600000\n"
LARGE_BODY = b"x" * (320 * 1024)


def lazy_flush_broker(root: Path, extra_toml: str = "") -> Broker:
    broker = Broker(root, commitlog=1024 * 1024, cq=4096, extra_toml=extra_toml)
    config = broker.root / "broker.toml"
    config.write_text(config.read_text().replace("[flush]\n", LAZY_FLUSH, 1))
    return broker


def actor_report(broker: Broker, actor: str) -> dict[str, Any]:
    status = broker.status()
    assert status is not None
    report: dict[str, Any] = status["actors"][actor]
    return report


@contextmanager
def flush_watch(broker: Broker) -> Iterator[FlushedFollower]:
    """The flush service's ``flushed`` notices, as the broker's actors get them."""
    ctx = zmq.Context()
    follower = FlushedFollower(ctx, broker.endpoints().flushed)
    try:
        yield follower
    finally:
        follower.close()
        ctx.term()


def flushed_end(follower: FlushedFollower) -> int:
    """How far the commitlog is flushed now: a notice published after this call began (one comes
    every flush round)."""
    follower.drain()
    assert follower.socket.poll(10_000), "no flushed notice"
    return follower.drain()


def copies(store: Path, topic: str, count: int) -> list[ReceivedMessage]:
    got: list[ReceivedMessage] = []
    with Consumer(store, group=f"Check_{topic}", topic=topic, queues=[0], start="earliest") as consumer:
        wait_for(lambda: got.extend(consumer.poll(200)) or len(got) >= count, 30, f"{count} copies on {topic}")
    assert len(got) == count
    return got


def scheduler_passed(broker: Broker, count: int) -> bool:
    offsets = actor_report(broker, "scheduler").get("offsets")
    return offsets is not None and offsets[0] == count


def test_delay_offsets_are_saved_only_once_their_copies_are_flushed(tmp_path: Path) -> None:
    with lazy_flush_broker(tmp_path, LEVELS_TOML) as broker, flush_watch(broker) as flushed, \
            Producer(broker.store) as producer:
        for n in (1, 2):
            assert producer.send("Later", f"delayed-{n}".encode(), properties={"DELAY": "1"}, queue_id=0).ok
            wait_for(lambda n=n: scheduler_passed(broker, n), 30, f"the scheduler past entry {n - 1}")
        first, second = copies(broker.store, "Later", 2)
        # the scheduler's round that sent the second copy came a level's delay after the first was
        # stored, past the save interval: without the flush's say, it saved the first then
        assert flushed_end(flushed) <= first.phys_offset, "the flush moved without a large send"
        assert read_delay_offsets(broker.store).offsets.get(1, 0) == 0
        assert read_reput_floor(broker.store) is not None and read_reput_floor(broker.store) <= first.phys_offset

        assert producer.send("Bulk", LARGE_BODY).ok  # 80 pages: the next flush round covers the copies
        wait_for(lambda: read_delay_offsets(broker.store).offsets.get(1, 0) == 2, 30, "delayOffset.json at 2")
        assert flushed_end(flushed) > second.phys_offset
        assert broker.stop() == 0


def test_a_group_committed_past_a_lost_tail_reads_the_sends_after_recovery(tmp_path: Path) -> None:
    """A power cut took the last records of a queue after a group committed past them (the commit is
    checked against the page cache). After recovery the group's offset is at the recovered end, and
    the messages sent after it, at the offsets the lost ones had, are all consumed: none skipped."""
    broker = Broker(tmp_path, commitlog=1024 * 1024, cq=4096)
    with broker, Producer(broker.store) as producer:
        results = [producer.send("Cut", f"m-{i}".encode(), queue_id=0) for i in range(9)]
        assert [r.queue_offset for r in results] == list(range(9))
        with Consumer(broker.store, group="G", topic="Cut", queues=[0], start="earliest") as consumer:
            got: list[ReceivedMessage] = []
            wait_for(lambda: got.extend(consumer.poll(200)) or len(got) >= 9, 30, "9 messages")
            consumer.commit()
        assert broker.stop() == 0
    # the power cut: the last four records never reached the disk, and the store did not stop cleanly
    cut = results[5].phys_offset
    with open(broker.store / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(cut)
        f.write(bytes(results[8].phys_offset + 4096 - cut))
    create_abort(broker.store, 1)
    with broker, Producer(broker.store) as producer:
        with Admin(broker.store) as admin:
            assert admin.fetch_offset("G", "Cut", 0) == 5  # at the recovered end, not past it
        # as many as were lost and one more: the group's old offset 9 is inside them
        after = [producer.send("Cut", f"after-{i}".encode(), queue_id=0) for i in range(5)]
        assert [r.queue_offset for r in after] == [5, 6, 7, 8, 9]
        got = []
        with Consumer(broker.store, group="G", topic="Cut", queues=[0]) as consumer:
            wait_for(lambda: got.extend(consumer.poll(200)) or len(got) >= 5, 30, "the 5 messages sent after recovery")
        assert [m.body for m in got] == [f"after-{i}".encode() for i in range(5)]
        assert broker.stop() == 0


def test_the_timer_marks_a_slot_delivered_on_disk_only_once_its_copy_is_flushed(tmp_path: Path) -> None:
    """``config/timercheck`` is a mapping the kernel may write back at any moment: the slot a copy was
    delivered for may be marked there only once the commitlog holds the copy durably."""
    with lazy_flush_broker(tmp_path, "\n[store]\ntimer_precision_ms = 100\n") as broker, \
            flush_watch(broker) as flushed, Producer(broker.store) as producer:
        assert producer.send("Timed", b"t", properties={"TIMER_DELAY_MS": "300"}, queue_id=0).ok
        wait_for(lambda: actor_report(broker, "timer").get("delivered", 0) >= 1, 30, "the timer's copy")
        (copy,) = copies(broker.store, "Timed", 1)
        due_ms = int(copy.properties["TIMER_OUT_MS"])
        # a later round of the loop, which wrote the mark into the mapping before this fix
        read_ms = actor_report(broker, "timer")["read_ms"]
        wait_for(lambda: actor_report(broker, "timer")["read_ms"] > read_ms, 30, "a later timer round")
        assert flushed_end(flushed) <= copy.phys_offset, "the flush moved without a large send"
        checkpoint = TimerCheckpoint.open(broker.store)
        try:
            assert checkpoint.last_read_ms <= due_ms and checkpoint.delivered_slot_ms < 0
            assert 0 <= checkpoint.in_flight_phys <= copy.phys_offset  # where a restart looks for the copy

            assert producer.send("Bulk", LARGE_BODY).ok  # the next flush round covers the copy
            wait_for(lambda: checkpoint.last_read_ms > due_ms, 30, "the slot marked delivered in timercheck")
            assert flushed_end(flushed) > copy.phys_offset
        finally:
            checkpoint.close()
        assert broker.stop() == 0
