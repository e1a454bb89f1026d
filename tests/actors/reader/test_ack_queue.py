"""AckQueue on a real queue index in a temp dir: hand-outs, acks, nacks, visibility timeouts, dead
letters, prefetch bookkeeping, and what a reopen (clean or as after SIGKILL) brings back."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.actors.reader.ack_queue import (
    OK,
    PUBLISH_AHEAD,
    PUBLISH_LOW,
    UNKNOWN_RECEIPT,
    AckQueue,
    Located,
    msg_id_prefix,
)
from mqstore.actors.reader.ack_queues import redelivery_delays
from mqstore.engine.delay.table import parse_delay_levels
from mqstore.engine.log.host import Host

PREFIX = msg_id_prefix(Host("127.0.0.1", 10911).packed)
VIS_MS = 1000


def open_queue(path: Path, max_deliveries: int = 3) -> AckQueue:
    return AckQueue.open(path, host_prefix=PREFIX, max_deliveries=max_deliveries, max_journal_entries=64)


def publish(q: AckQueue, seqs: range) -> None:
    q.publish([Located(s, 1000 + 100 * s, 100) for s in seqs], seqs.stop)


def test_take_ack_and_prefetch_bookkeeping(tmp_path: Path) -> None:
    q = open_queue(tmp_path)
    publish(q, range(5, 15))  # a group that starts past offset 0
    first = q.take("a", 4, now_ms=0, visibility_ms=VIS_MS)
    assert [(h.seq, h.phys_offset, h.redelivered, h.delivery_count) for h in first] == [
        (s, 1000 + 100 * s, False, 1) for s in range(5, 9)]
    assert q.in_flight_of("a") == 4 and q.in_flight_of("b") == 0
    assert [h.seq for h in q.take("b", 100, now_ms=0, visibility_ms=VIS_MS)] == list(range(9, 15))
    assert q.ack([5, 6, 5, 99, 3]) == [OK, OK, UNKNOWN_RECEIPT, UNKNOWN_RECEIPT, UNKNOWN_RECEIPT]
    assert q.in_flight_of("a") == 2 and q.index.unacked_count == 8
    assert q.take("a", 10, now_ms=0, visibility_ms=VIS_MS) == []


def test_visibility_timeout_then_dead_letter_after_max_deliveries(tmp_path: Path) -> None:
    q = open_queue(tmp_path, max_deliveries=3)
    publish(q, range(2))
    q.take("a", 2, now_ms=0, visibility_ms=VIS_MS)
    assert q.ack([1]) == [OK]
    assert q.expire(VIS_MS - 1) == 0 and q.next_deadline_ms() == VIS_MS  # the acked one's deadline is stale
    for count in (2, 3):
        assert q.expire(10 * count * VIS_MS) == 1 and q.in_flight_of("a") == 0
        [again] = q.take("b", 5, now_ms=10 * count * VIS_MS, visibility_ms=VIS_MS)
        assert (again.seq, again.redelivered, again.delivery_count) == (0, True, count)
    assert q.expire(100 * VIS_MS) == 1
    assert list(q.dead) == [0] and q.dead[0].delivery_count == 3 and not q.has_available
    assert q.take("b", 5, now_ms=100 * VIS_MS, visibility_ms=VIS_MS) == []
    q.dead_lettered([0])
    assert not q.dead and q.index.unacked_count == 0


def test_nack_requeue_and_not(tmp_path: Path) -> None:
    q = open_queue(tmp_path, max_deliveries=5)
    publish(q, range(3))
    q.take("a", 3, now_ms=0, visibility_ms=VIS_MS)
    assert q.nack([1, 7], requeue=True) == [OK, UNKNOWN_RECEIPT]
    assert q.nack([2], requeue=False) == [OK] and list(q.dead) == [2]
    [back] = q.take("a", 3, now_ms=1, visibility_ms=VIS_MS)
    assert (back.seq, back.redelivered, back.delivery_count) == (1, True, 2)
    assert q.ack([2]) == [OK] and not q.dead  # acked while waiting for the DLQ: no copy needed


def test_release_gives_back_a_leaving_consumers_deliveries(tmp_path: Path) -> None:
    q = open_queue(tmp_path, max_deliveries=2)
    publish(q, range(4))
    q.take("a", 3, now_ms=0, visibility_ms=VIS_MS)
    q.take("b", 1, now_ms=0, visibility_ms=VIS_MS)
    assert q.release("a", read={0}) == 3 and q.in_flight_of("a") == 0 and q.in_flight_of("b") == 1
    handed = q.take("b", 10, now_ms=1, visibility_ms=VIS_MS)
    assert [(h.seq, h.redelivered, h.delivery_count) for h in handed] == [(0, True, 2), (1, True, 1), (2, True, 1)]
    assert q.release("b", read={0, 1, 2, 3}) == 4
    assert sorted(q.dead) == [0] and q.retry_count == 3  # its 2nd counted delivery was its last


def test_reopen_after_a_crash_redelivers_what_was_delivered_and_not_acked(tmp_path: Path) -> None:
    q = open_queue(tmp_path)
    publish(q, range(200))  # past max_journal_entries: some of it is in segment files
    q.take("a", 120, now_ms=0, visibility_ms=VIS_MS)
    q.ack(range(0, 120, 2))
    q.close(clean=False)  # as SIGKILL leaves it
    q = open_queue(tmp_path)
    assert q.retry_count == 60 and [m.seq for m in q.fresh] == list(range(120, 200))
    handed = q.take("b", 1000, now_ms=0, visibility_ms=VIS_MS)
    assert [h.seq for h in handed] == [*range(1, 120, 2), *range(120, 200)]
    assert all(h.redelivered and h.delivery_count == 2 for h in handed[:60])
    assert not any(h.redelivered for h in handed[60:])
    assert q.scan_from == 200
    q.close(clean=True)
    q = open_queue(tmp_path)
    assert q.retry_count == 140 and not q.fresh
    q.close(clean=True)


def test_publish_window(tmp_path: Path) -> None:
    q = open_queue(tmp_path)
    assert q.publish_room() == PUBLISH_AHEAD
    publish(q, range(PUBLISH_LOW))
    assert q.publish_room() == 0
    q.take("a", 1, now_ms=0, visibility_ms=VIS_MS)
    assert q.publish_room() == PUBLISH_AHEAD - PUBLISH_LOW + 1
    q.publish([], 10_000)  # entries skipped (filtered out, gone): looked at, not indexed
    assert q.scan_from == 10_000 and q.index.next_seq_id == PUBLISH_LOW
    with pytest.raises(ValueError):
        AckQueue(q.index, b"short", 3)
    q.close(clean=True)


def test_a_failed_delivery_waits_its_level_delay_and_keeps_its_receipt(tmp_path: Path) -> None:
    """A nack with requeue and a visibility timeout come back after the delay of level 3 + deliveries - 1
    (RocketMQ's retries); a consumer leaving gives its messages back at once."""
    delays = redelivery_delays(parse_delay_levels("1s 2s 3s 4s 5s"), 3)
    assert delays == (3000, 4000, 5000)
    q = AckQueue.open(tmp_path, host_prefix=PREFIX, max_deliveries=5, max_journal_entries=64,
                      redelivery_delays_ms=delays)
    publish(q, range(3))
    q.take("a", 2, now_ms=0, visibility_ms=VIS_MS)
    q.take("c", 1, now_ms=0, visibility_ms=100 * VIS_MS)
    assert q.nack([0], requeue=True, now_ms=100) == [OK]
    assert q.next_retry_ms() == 3100 and not q.has_available and q.retry_count == 1
    assert q.take("b", 5, now_ms=3099, visibility_ms=VIS_MS) == []
    [back] = q.take("b", 5, now_ms=3100, visibility_ms=VIS_MS)
    assert (back.seq, back.redelivered, back.delivery_count) == (0, True, 2)
    assert q.expire(3100 + VIS_MS) == 2  # seq 0's second delivery and seq 1: level 4 and level 3
    assert q.next_retry_ms() == 3100 + VIS_MS + 3000
    assert q.promote(3100 + VIS_MS + 3000) == 1 and q.has_available
    assert [h.seq for h in q.take("b", 5, now_ms=3100 + VIS_MS + 3000, visibility_ms=VIS_MS)] == [1]
    assert q.promote(3100 + VIS_MS + 4000) == 1
    assert q.ack([0]) == [OK] and not q.has_available  # acked while due again: gone
    assert q.release("c", read={2}) == 1 and q.has_available  # leaving: at once, no delay
    assert [h.seq for h in q.take("c", 5, now_ms=0, visibility_ms=VIS_MS)] == [2]


def test_purge_below_acks_what_is_ready_and_leaves_what_consumers_hold(tmp_path: Path) -> None:
    """Below the floor: fresh, due again (at once or waiting its delay) and never indexed are acked,
    durably; in consumers' hands and on the way to the DLQ stay, and a reopen brings back only those."""
    q = AckQueue.open(tmp_path, host_prefix=PREFIX, max_deliveries=3, max_journal_entries=64,
                      redelivery_delays_ms=(60_000,))
    publish(q, range(10))  # indexed 0-9; 10-19 in the consume queue, not indexed yet
    q.take("a", 5, now_ms=0, visibility_ms=VIS_MS)  # 0-4 handed out
    assert q.nack([0], requeue=True, now_ms=1) == [OK]      # due again after its delay
    assert q.nack([1], requeue=False) == [OK]               # for the DLQ
    q.release("a", set())  # 2, 3, 4 due again at once...
    q.take("b", 1, now_ms=2, visibility_ms=VIS_MS)          # ... and 2 handed out again
    assert (sorted(q.in_flight), sorted(q.dead), q.retry_count, len(q.fresh)) == ([2], [1], 3, 5)
    purged, kept = q.purge_below(20, Located(19, 1000 + 100 * 19, 100))
    assert (purged, kept) == (3 + 5 + 10, 1)  # 0, 3, 4; 5-9; 10-19
    assert (q.retry_count, len(q.fresh), q.scan_from, q.has_available) == (0, 0, 20, False)
    assert sorted(q.unacked_located()) == [1, 2]
    q.close(clean=False)  # as SIGKILL leaves it: the purge was fsynced
    q = open_queue(tmp_path)
    assert sorted(q.unacked_located()) == [1, 2] and q.index.next_seq_id == 20 and not q.fresh
    q.close(clean=True)
