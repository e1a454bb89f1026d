"""A timer with its files open and nothing due sleeps until the first slot that holds records, or
the idle safety net: it used to wake every precision step (a second) to read an empty slot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from mqstore.actors.clock import wall_ms
from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.ticks import IDLE_TICK_MS
from mqstore.actors.timer.actor import TimerActor
from mqstore.engine import MessageStore


@pytest.fixture
def timer(tmp_path: Path) -> Iterator[TimerActor]:
    config = load_config(tmp_path / "store", None)
    MessageStore.open(config.store_dir).close()
    runtime = Runtime("timer", config, zmq.Context())
    actor = TimerActor(runtime)
    assert actor.open_store(create=True)
    yield actor
    actor.close()
    runtime.close()


def test_a_timer_with_nothing_due_sleeps_the_idle_safety_net(timer: TimerActor) -> None:
    assert timer.next_slot_in_ms() > IDLE_TICK_MS - 1_000  # it was at most a precision step: 1 s


def test_a_slot_that_holds_a_record_wakes_it_when_due(timer: TimerActor) -> None:
    precision = timer.precision_ms
    slot_ms = (wall_ms() // precision + 2) * precision
    timer.store.enqueue(4096, 100, slot_ms, "Real", wall_ms())
    assert timer.next_slot_in_ms() <= 2 * precision + precision  # due at slot + P, not at the safety net
    assert timer.next_slot_in_ms() > 0
