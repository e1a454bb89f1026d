"""An idle scheduler sleeps: with no delayed message due, every level at its queue's end, its loop's
poll waits the broker's idle safety net (a dropped ``arrived`` notice costs that much), not a second;
a level whose head comes due sooner, or progress waiting to be saved, wakes it then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.config import load_config
from mqstore.actors.runtime import Runtime
from mqstore.actors.scheduler.actor import SchedulerActor
from mqstore.actors.ticks import IDLE_TICK_MS
from mqstore.engine import MessageStore


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[SchedulerActor]:
    config = load_config(tmp_path / "store", None)
    MessageStore.open(config.store_dir).close()
    runtime = Runtime("scheduler", config, zmq.Context())
    actor = SchedulerActor(runtime)
    yield actor
    actor.schedule.close()
    runtime.close()


def test_a_scheduler_with_nothing_due_sleeps_the_idle_safety_net(scheduler: SchedulerActor) -> None:
    scheduler._send_due(wall_ms())  # every level looked at: each queue is empty
    assert scheduler.at_end == set(scheduler.levels.levels)
    assert scheduler._timeout_ms() > IDLE_TICK_MS - 1_000  # it was at most 1 s: a wake-up a second for nothing


def test_a_level_due_sooner_or_progress_to_save_wakes_it_sooner(scheduler: SchedulerActor) -> None:
    scheduler._send_due(wall_ms())
    scheduler.next_look_ms[3] = wall_ms() + 300  # a head due in 300 ms
    assert scheduler._timeout_ms() <= 300
    scheduler.next_look_ms[3] = wall_ms() + IDLE_TICK_MS
    scheduler.progress.dirty, scheduler.progress.next_save_ms = True, monotonic_ms() + 200
    assert scheduler._timeout_ms() <= 200
