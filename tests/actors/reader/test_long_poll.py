"""Parked ack-mode pulls (mqstore.actors.reader.long_poll.ParkedAckPulls): in line per queue, out by deadline."""

from __future__ import annotations

from mqstore.actors.reader.ack_requests import AckPull
from mqstore.actors.reader.long_poll import ParkedAckPull, ParkedAckPulls
from mqstore.engine.read.lookup import TagFilter


def _parked(consumer: str, queue_id: int, deadline_ms: int) -> ParkedAckPull:
    pull = AckPull("G", "T", queue_id, consumer, 32, 64, 1000, TagFilter.parse("*"))
    return ParkedAckPull(consumer.encode(), f"{consumer}@{deadline_ms}", pull, deadline_ms)


def test_a_woken_pull_that_still_finds_nothing_keeps_its_place() -> None:
    parked = ParkedAckPulls()
    for consumer, deadline_ms in (("a", 300), ("b", 100), ("c", 200)):
        parked.park(_parked(consumer, 0, deadline_ms))
    parked.park(_parked("a", 1, 400))
    assert len(parked) == 4 and parked.waited_on() == [("G", "T", 0), ("G", "T", 1)]
    line = parked.waiting(("G", "T", 0))
    assert [p.pull.consumer for _, p in line] == ["a", "b", "c"]
    parked.unpark(("G", "T", 0), line[1][0])  # b was answered; a and c found nothing
    assert [p.pull.consumer for _, p in parked.waiting(("G", "T", 0))] == ["a", "c"]
    assert parked.ms_to_next_deadline(0, 1000) == 200  # b's deadline went with it
    assert [p.pull.consumer for p in parked.take_consumer(("G", "T", 0), "a")] == ["a"]
    assert [p.request_id for p in parked.expired(350)] == ["c@200"]
    assert parked.waited_on() == [("G", "T", 1)]
    assert parked.ms_to_next_deadline(350, 10) == 10
    assert [p.request_id for p in parked.drain()] == ["a@400"]
    assert len(parked) == 0 and parked.ms_to_next_deadline(350, 10) == 10


def test_a_full_table_says_so() -> None:
    parked = ParkedAckPulls(capacity=2)
    parked.park(_parked("a", 0, 100))
    assert not parked.full
    parked.park(_parked("b", 0, 100))
    assert parked.full
    assert len(list(parked.expired(100))) == 2 and not parked.full


def test_the_table_is_true_while_any_pull_is_parked() -> None:
    """What the reader asks every round: a queue's entry goes with its last pull, however it goes."""
    parked = ParkedAckPulls()
    assert not parked
    parked.park(_parked("a", 0, 100))
    parked.park(_parked("b", 1, 200))
    parked.park(_parked("c", 2, 300))
    parked.unpark(("G", "T", 0), parked.waiting(("G", "T", 0))[0][0])
    assert parked and len(parked) == 2
    assert parked.take_consumer(("G", "T", 1), "b") and parked and len(parked) == 1
    assert list(parked.expired(300)) and not parked and len(parked) == 0
    parked.park(_parked("d", 0, 400))
    assert parked and parked.drain() and not parked
