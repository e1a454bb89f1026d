"""The timer's enqueue across a power cut, through a real broker under ASYNC_FLUSH.

The flush service here flushes only when 64 pages wait, so timer messages stay in the page cache
until a large send pushes the flush past them. The power cut: every process of the broker stopped
and killed at once (no actor gets to flush or sync anything on its way out), the commitlog's bytes
past the last flush zeroed, ``abort`` left. The timer's own files keep every byte it wrote, as if
the kernel had written them all back: the timerlog names messages the commitlog lost, and the
checkpoint says what the timer had enqueued of them.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psutil

from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import DecodeKind
from mqstore.engine.repair.verify import verify_store
from mqstore.ipc.client.api import Producer
from mqstore.scripts.harness import Broker
from tests.integration.broker import wait_for
from tests.integration.test_progress_after_flush import (
    LARGE_BODY,
    actor_report,
    copies,
    flush_watch,
    flushed_end,
    lazy_flush_broker,
)

TIMER_TOML = "\n[store]\ntimer_precision_ms = 100\n"
DURABLE_DELAY_MS = "4000"  # due after the restart
COMMITLOG_FILE_SIZE = 1024 * 1024  # lazy_flush_broker's


def power_cut(broker: Broker) -> None:
    """Stop every process of the broker, then kill them all (SIGKILL)."""
    assert broker.proc is not None
    supervisor = psutil.Process(broker.proc.pid)
    tree = [supervisor, *supervisor.children(recursive=True)]
    for proc in tree:
        proc.send_signal(signal.SIGSTOP)
    for proc in tree:
        proc.send_signal(signal.SIGKILL)
    broker.proc.wait()
    broker.proc = None
    psutil.wait_procs(tree, timeout=30)


def zero_after(commitlog_dir: Path, flushed: int) -> None:
    """What the flush had not covered never reached the disk."""
    for path in sorted(p for p in commitlog_dir.iterdir() if p.name.isdigit()):
        base, size = int(path.name), path.stat().st_size
        if base + size > flushed:
            with open(path, "r+b") as f:
                f.seek(max(0, flushed - base))
                f.write(bytes(size - max(0, flushed - base)))


def timer_enqueued(broker: Broker) -> int:
    return int(actor_report(broker, "timer").get("enqueued", 0))


def test_timers_sent_after_a_power_cut_are_delivered_and_durable_ones_once(tmp_path: Path) -> None:
    broker = lazy_flush_broker(tmp_path, TIMER_TOML)
    with broker, flush_watch(broker) as flushed, Producer(broker.store) as producer:
        durable = [producer.send("Timed", f"durable-{i}".encode(), properties={"TIMER_DELAY_MS": DURABLE_DELAY_MS},
                                 queue_id=0) for i in range(3)]
        assert all(r.ok for r in durable)
        assert producer.send("Bulk", LARGE_BODY).ok  # the next flush round covers the durable timers
        wait_for(lambda: flushed_end(flushed) > durable[-1].phys_offset, 30, "the durable timers flushed")
        lost = [producer.send("Timed", f"lost-{i}".encode(), properties={"TIMER_DELAY_MS": DURABLE_DELAY_MS},
                              queue_id=0) for i in range(3)]
        assert all(r.ok for r in lost)
        wait_for(lambda: timer_enqueued(broker) == 6, 30, "the timer enqueuing all six")
        cut = flushed_end(flushed)
        assert cut <= lost[0].phys_offset, "the flush moved without a large send"
        power_cut(broker)
    zero_after(broker.store / "commitlog", cut)
    assert (broker.store / "abort").exists()

    with broker, Producer(broker.store) as producer:
        # other sizes than the lost ones: none lands exactly where a lost one was
        after = [producer.send("Timed", f"after-recovery-{i}".encode(), properties={"TIMER_DELAY_MS": "300"},
                               queue_id=0) for i in range(3)]
        assert [r.queue_offset for r in after] == [3, 4, 5]  # the lost ones' queue offsets, taken again
        got = copies(broker.store, "Timed", 6)
        assert sorted(m.body for m in got) == sorted([f"durable-{i}".encode() for i in range(3)]
                                                     + [f"after-recovery-{i}".encode() for i in range(3)])
        last_due = max(int(m.properties["TIMER_OUT_MS"]) for m in got)
        wait_for(lambda: actor_report(broker, "timer")["read_ms"] > last_due, 30, "the timer past the last slot due")
        assert len(copies(broker.store, "Timed", 6)) == 6  # and nothing delivered twice since
        assert broker.stop() == 0
    report = verify_store(broker.store)
    assert report.ok, report


def zero_timer_log(store: Path) -> None:
    """A timerlog the timer never flushed, none of it written back: its records are lost."""
    for path in (store / "timerlog").iterdir():
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.write(bytes(size))


def test_timers_delivered_before_a_power_cut_that_took_their_timerlog_are_not_delivered_again(
        tmp_path: Path) -> None:
    """The copies were flushed, the slot they were delivered from marked read in the checkpoint's
    mapping, and the timer's own flush (timerlog, wheel, the enqueue's mark) had not come: after the
    cut the recovery enqueued the three entries again, into the slot being read, and delivered each a
    second time."""
    toml = TIMER_TOML + "timer_flush_interval_ms = 3600000\n"  # the timer's files are never flushed before the cut
    broker = lazy_flush_broker(tmp_path, toml)
    with broker, flush_watch(broker) as flushed, Producer(broker.store) as producer:
        sent = [producer.send("Timed", f"timer-{i}".encode(), properties={"TIMER_DELAY_MS": "300"}, queue_id=0)
                for i in range(3)]
        assert all(r.ok for r in sent)
        assert producer.send("Bulk", LARGE_BODY).ok
        got = copies(broker.store, "Timed", 3)
        assert producer.send("Bulk", LARGE_BODY).ok  # the next flush round covers the copies
        copies_end = max(m.phys_offset for m in got) + 1
        last_due = max(int(m.properties["TIMER_OUT_MS"]) for m in got)
        wait_for(lambda: flushed_end(flushed) >= copies_end, 30, "the copies flushed")
        wait_for(lambda: actor_report(broker, "timer")["read_ms"] > last_due
                 and actor_report(broker, "timer").get("flushed", 0) >= copies_end, 30,
                 "the timer past the slot, told the copies are flushed")
        cut = flushed_end(flushed)
        power_cut(broker)
    zero_after(broker.store / "commitlog", cut)
    zero_timer_log(broker.store)

    with broker:
        wait_for(lambda: actor_report(broker, "timer").get("enqueued") == 3, 30, "the timer walking its queue")
        walked_ms = int(time.time() * 1000)
        wait_for(lambda: actor_report(broker, "timer")["read_ms"] > walked_ms + 100, 30,
                 "the timer past the slot it was walking in")
        assert broker.stop() == 0
    assert stored_bodies(broker.store, "Timed") == [f"timer-{i}".encode() for i in range(3)]
    assert verify_store(broker.store).ok


def stored_bodies(store: Path, topic: str) -> list[bytes]:
    """The bodies of every record on ``topic`` in the stopped store's commitlog."""
    commitlog = CommitLog.open(store / "commitlog", COMMITLOG_FILE_SIZE, writable=False)
    try:
        return sorted(d.record.body for _, d in commitlog.scan(commitlog.min_offset)
                      if d.kind is DecodeKind.RECORD and d.record is not None and d.record.topic == topic)
    finally:
        commitlog.close()
