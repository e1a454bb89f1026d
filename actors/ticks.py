"""When a periodic notice publishes (``Ticks``): the writer's tick (how far the log goes, how far
builders may apply) and the flush service's ``flushed``. PUB/SUB drops, so such a notice repeats what
its subscribers may have missed; but one that says the same again every interval wakes every
subscriber for nothing while the broker idles. So a move is published on ``REPEATS`` ticks (one lost
notice costs a tick), and what stays the same only every ``IDLE_TICK_MS``, the safety net.
"""

from __future__ import annotations

IDLE_TICK_MS = 5_000  # while nothing moves, the tick is still published this often: a safety net for a lost notice
REPEATS = 2  # a move is published on this many ticks: one lost notice costs a tick, not IDLE_TICK_MS


class Ticks:
    """When a tick publishes: on ``REPEATS`` ticks after what it carries moved or a waiter asks for it
    (``sync``), then only every ``IDLE_TICK_MS``."""

    __slots__ = ("carried", "next_idle_ms", "repeats")

    def __init__(self) -> None:
        self.carried: tuple[int, ...] = ()
        self.repeats = 0
        self.next_idle_ms = 0

    def due(self, carried: tuple[int, ...], sync: bool, now_ms: int) -> bool:
        if carried != self.carried or sync:
            self.carried, self.repeats = carried, REPEATS
        if self.repeats == 0 and now_ms < self.next_idle_ms:
            return False
        self.repeats = max(self.repeats - 1, 0)
        self.next_idle_ms = now_ms + IDLE_TICK_MS
        return True

    def quiet(self, carried: tuple[int, ...]) -> bool:
        """Nothing to publish before ``next_idle_ms`` while what the tick carries stays ``carried``."""
        return self.repeats == 0 and carried == self.carried
