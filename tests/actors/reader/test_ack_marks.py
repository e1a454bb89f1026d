"""A master's ack marks taken in on real queue indexes: ``AckQueue.ack_below`` (what memory holds below
the mark goes, the index acks it durably, hand-outs go on from the mark) and ``AckQueues.take_marks``
(only the queues this reader owns, forward only, never past the queue's end here)."""

from __future__ import annotations

from pathlib import Path

from mqstore.actors.config import load_config
from mqstore.actors.reader.ack_queue import OK, UNKNOWN_RECEIPT, AckQueue, Located, msg_id_prefix
from mqstore.actors.reader.ack_queues import AckQueues
from mqstore.engine.log.host import Host
from mqstore.ipc.wire import receipts

PREFIX = msg_id_prefix(Host("127.0.0.1", 10911).packed)
VIS_MS = 1000


def open_queue(path: Path) -> AckQueue:
    return AckQueue.open(path, host_prefix=PREFIX, max_deliveries=3, max_journal_entries=64)


def publish(q: AckQueue, seqs: range) -> None:
    q.publish([Located(s, 1000 + 100 * s, 100) for s in seqs], seqs.stop)


def test_ack_below_forgets_what_memory_holds_below_the_mark(tmp_path: Path) -> None:
    q = open_queue(tmp_path)
    publish(q, range(10))
    q.take("a", 4, now_ms=0, visibility_ms=VIS_MS)
    assert q.ack([0]) == [OK]
    assert q.nack([1], requeue=True, now_ms=0) == [OK] and q.nack([2], requeue=False) == [OK]
    assert q.ack_below(6) == 5                     # 1 (due again), 2 (dead), 3 (in flight), 4, 5 (fresh)
    assert q.in_flight_of("a") == 0 and not q.dead and q.retry_count == 0
    assert q.ack([3]) == [UNKNOWN_RECEIPT]
    assert [h.seq for h in q.take("b", 10, now_ms=0, visibility_ms=VIS_MS)] == [6, 7, 8, 9]
    assert q.ack_below(4) == 0                     # never backwards
    q.close(clean=False)                            # as after SIGKILL
    again = open_queue(tmp_path)
    assert sorted(h.seq for h in again.take("c", 10, now_ms=0, visibility_ms=VIS_MS)) == [6, 7, 8, 9]
    again.close(clean=True)


def test_a_mark_on_a_queue_never_indexed_starts_the_group_there(tmp_path: Path) -> None:
    q = open_queue(tmp_path)
    assert q.ack_below(7) == 0 and q.scan_from == 7 and q.index.next_seq_id == 7
    q.close(clean=False)
    again = open_queue(tmp_path)
    assert again.scan_from == 7
    again.close(clean=True)


def queues(store: Path, reader_index: int, readers: int = 2) -> AckQueues:
    cfg = load_config(store, broker={"readers": readers})
    return AckQueues(store, reader_index, cfg.broker, host_prefix=PREFIX, now_ms=lambda: 0)


def owned_by(reader_index: int, topic: str, queue_id: int) -> tuple[str, str, int]:
    """A key reader ``reader_index`` of two owns."""
    group = next(f"G{i}" for i in range(1000) if receipts.ack_owner(f"G{i}", topic, queue_id, 2) == reader_index)
    return group, topic, queue_id


def test_take_marks_owned_forward_only_and_within_the_queue(tmp_path: Path) -> None:
    ends = {("T", 0): 5, ("T", 1): 20, ("T", 2): 0}
    short, long, empty = owned_by(0, "T", 0), owned_by(0, "T", 1), owned_by(0, "T", 2)
    other = owned_by(1, "T", 1)
    mine = queues(tmp_path, 0)
    marks = [(*key, 8) for key in (short, long, empty, other)]
    assert mine.take_marks(marks, lambda t, q: ends[(t, q)]) == (2, 0, [(*short, 5), (*empty, 0)])
    q_short, q_long = mine.opened(short), mine.opened(long)
    assert q_short is not None and q_short.scan_from == 5    # held at this broker's queue end
    assert q_long is not None and q_long.scan_from == 8
    for key in (empty, other):                               # nothing to move; another reader's
        assert mine.opened(key) is None and not (tmp_path / "queueindex" / key[0] / "T" / str(key[2])).exists()
    # lower marks: nothing moves (the empty queue's is still held at 0)
    assert mine.take_marks([(*key, 3) for key in (short, long, empty)], lambda t, q: ends[(t, q)]) == (
        0, 0, [(*empty, 0)])
    assert q_short.scan_from == 5 and q_long.scan_from == 8
    # the log caught up: the mark held back goes on
    ends[("T", 0)] = 8
    assert mine.take_marks(marks[:2], lambda t, q: ends[(t, q)]) == (1, 0, [])
    assert q_short.scan_from == 8
    mine.close()


def test_take_marks_acks_what_a_consumer_here_was_handed(tmp_path: Path) -> None:
    mine = queues(tmp_path, 0, readers=1)
    q = mine.get(("G", "T", 0), create=True)
    assert q is not None
    publish(q, range(6))
    q.take("a", 6, now_ms=0, visibility_ms=VIS_MS)
    assert q.ack([4]) == [OK]
    assert mine.take_marks([("G", "T", 0, 5)], lambda t, queue_id: 6) == (1, 4, [])
    assert [seq for seq in q.unacked_located()] == [5]
    mine.close()
    again = queues(tmp_path, 0, readers=1)
    reopened = again.get(("G", "T", 0), create=False)
    assert reopened is not None and list(reopened.unacked_located()) == [5]
    again.close()
