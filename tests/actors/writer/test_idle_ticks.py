"""An idle writer publishes no tick while nothing changed: its tick carries a move on two ticks (one
lost notice costs a tick), then only every ``IDLE_TICK_MS`` as a safety net; a flush wanted is
published on every tick, as before."""

from __future__ import annotations

from typing import Any

from mqstore.actors.ticks import IDLE_TICK_MS
from mqstore.actors.writer.outlets import Outlets, Progress
from mqstore.ipc.wire import schema
from tests.actors.writer.sent_frames import SentFrames


def _outlets() -> tuple[Outlets, list[bytes]]:
    published: list[bytes] = []

    class Out(SentFrames):
        def send_multipart(self, frames: list[Any], flags: int = 0, copy: bool = True) -> None:
            published.append(bytes(frames[0]))

    out = Out()
    return Outlets(out, out, out, Progress(dispatched_end=0)), published  # type: ignore[arg-type]


def _ticks(outlets: Outlets, end: int, start_ms: int, count: int, tick_ms: int = 100, sync: bool = False) -> int:
    return sum(outlets.tick(end, sync, start_ms + i * tick_ms) for i in range(count))


def test_an_idle_writer_publishes_no_tick_while_nothing_changed() -> None:
    outlets, published = _outlets()
    assert _ticks(outlets, 0, 0, 2) == 2  # the first two tell everyone where the log ends
    published.clear()
    ticks_in_idle_net = IDLE_TICK_MS // 100 - 1  # from 200 ms to the net's deadline, 100 ms + IDLE_TICK_MS
    assert _ticks(outlets, 0, 200, ticks_in_idle_net) == 0 and published == []
    assert outlets.tick(0, False, 100 + IDLE_TICK_MS)  # the safety net: a lost notice is made good
    assert published == [schema.WRITTEN, schema.TICK]


def test_a_move_is_published_on_two_ticks_then_nothing() -> None:
    outlets, _ = _outlets()
    outlets.tick(0, False, 0)
    outlets.progress.dispatched_end = 500  # a round appended and dispatched
    assert [outlets.tick(500, False, t) for t in (100, 200, 300, 400)] == [True, True, False, False]
    assert outlets.progress.ticks.quiet(outlets.progress.carried(500))
    assert not outlets.progress.ticks.quiet(outlets.progress.carried(600))  # the next round's end: a tick is due


def test_a_flush_wanted_is_published_on_every_tick_and_the_last_tick_always() -> None:
    outlets, _ = _outlets()
    outlets.tick(0, False, 0)
    assert _ticks(outlets, 0, 100, 5, sync=True) == 5
    assert _ticks(outlets, 0, 600, 5) == 1  # one repeat after the last tick that wanted a flush
    assert outlets.tick(0, False, 1200, force=True)
