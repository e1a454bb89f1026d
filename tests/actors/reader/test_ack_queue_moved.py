"""AckQueue with moved messages: ``relocate`` points every unacked message of a moved offset (fresh,
in flight, due again, dead) at its copy and keeps its seq, delivery count, redelivered flag and
deadline; the index keeps the original's msg id, so a reopen (clean, or as after SIGKILL, whatever
the journal and segments hold) reads the copies through ``moved`` and equals a queue never closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqstore.actors.reader.ack_queue import OK, AckQueue, Located, msg_id_prefix
from mqstore.engine.log.host import Host

PREFIX = msg_id_prefix(Host("127.0.0.1", 10911).packed)
VIS_MS = 1000
COPY = 1_000_000  # copies live far past the originals


def _phys(seq: int) -> int:
    return 1000 + 100 * seq


def _moves(seqs: list[int]) -> dict[int, tuple[int, int]]:
    return {_phys(s): (COPY + 200 * s, 150) for s in seqs}


def _open(path: Path, moved: dict[int, tuple[int, int]] | None = None, journal: int = 64) -> AckQueue:
    return AckQueue.open(path, host_prefix=PREFIX, max_deliveries=5, max_journal_entries=journal, moved=moved)


def _state(q: AckQueue) -> dict[int, tuple[int, int]]:
    return q.unacked_located()


def test_relocate_keeps_receipts_delivery_counts_and_flags(tmp_path: Path) -> None:
    q = _open(tmp_path)
    q.publish([Located(s, _phys(s), 100) for s in range(8)], 8)
    taken = q.take("a", 4, now_ms=0, visibility_ms=VIS_MS)        # 0..3 in flight
    assert q.nack([1], requeue=True) == [OK]                       # 1 due again
    assert q.nack([2], requeue=False) == [OK]                      # 2 dead
    assert [h.seq for h in taken] == [0, 1, 2, 3]
    moved = [0, 1, 2, 5]
    assert q.relocate(_moves(moved)) == 4
    assert _state(q) == {s: (COPY + 200 * s, 150) if s in moved else (_phys(s), 100) for s in range(8)}
    assert q.dead[2].phys_offset == COPY + 400 and q.dead[2].delivery_count == 1
    assert q.lowest_unacked_phys() == _phys(3)  # the oldest message was moved: a younger one is lowest
    again = q.take("b", 10, now_ms=0, visibility_ms=VIS_MS)
    assert [(h.seq, h.phys_offset, h.size, h.redelivered, h.delivery_count) for h in again] == [
        (1, COPY + 200, 150, True, 2), (4, _phys(4), 100, False, 1), (5, COPY + 1000, 150, False, 1),
        (6, _phys(6), 100, False, 1), (7, _phys(7), 100, False, 1)]
    assert q.expire(VIS_MS) == 5 + 2  # 0 and 3 from the first take, and the five just taken
    [zero] = [h for h in q.take("c", 10, now_ms=VIS_MS, visibility_ms=VIS_MS) if h.seq == 0]
    assert (zero.phys_offset, zero.redelivered, zero.delivery_count) == (COPY, True, 2)
    assert q.ack([0, 1, 5]) == [OK, OK, OK]
    q.close(clean=True)


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("journal", [2, 64])  # 2: the journal is flushed into segments as it goes
def test_a_reopened_queue_reads_moved_messages_from_their_copies(tmp_path: Path, clean: bool, journal: int) -> None:
    moved = _moves([0, 3, 6])
    q = _open(tmp_path, journal=journal)
    q.publish([Located(s, _phys(s), 100) for s in range(8)], 8)
    q.take("a", 4, now_ms=0, visibility_ms=VIS_MS)
    assert q.ack([1]) == [OK]
    q.relocate(moved)
    before = _state(q)
    q.close(clean=clean)
    reopened = _open(tmp_path, moved, journal=journal)
    assert _state(reopened) == before
    assert reopened.lowest_unacked_phys() == _phys(2)
    handed = reopened.take("b", 10, now_ms=0, visibility_ms=VIS_MS)
    # delivered before the reopen: due again, redelivered; the others fresh; every one where it is now
    assert [(h.seq, h.phys_offset, h.redelivered, h.delivery_count) for h in handed] == [
        (0, COPY, True, 2), (2, _phys(2), True, 2), (3, COPY + 600, True, 2), (4, _phys(4), False, 1),
        (5, _phys(5), False, 1), (6, COPY + 1200, False, 1), (7, _phys(7), False, 1)]
    reopened.close(clean=True)


def test_a_message_published_after_its_move_is_read_from_its_copy(tmp_path: Path) -> None:
    """A second group's queue indexes the original's entry after the move: its copy is where it is read."""
    q = _open(tmp_path, _moves([1]))
    q.publish([Located(s, _phys(s), 100) for s in range(3)], 3)
    assert [(h.seq, h.phys_offset, h.size) for h in q.take("a", 3, now_ms=0, visibility_ms=VIS_MS)] == [
        (0, _phys(0), 100), (1, COPY + 200, 150), (2, _phys(2), 100)]
    q.close(clean=True)
