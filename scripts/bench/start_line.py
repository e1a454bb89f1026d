"""Where a load run's processes wait for each other before the first send.

A run used to start at a fixed time a few seconds after spawning its producers and consumers; on
a loaded machine a process's imports can take longer than that, and a consumer that came late met
its queues' first messages seconds old (a 4.3 s maximum at half rate, the rest of the run at 14 ms
p50). Each process now says it is set up (its clients made, a consumer's queues assigned) and waits;
the run starts once all have, shortly after.
"""

from __future__ import annotations

import time
from typing import Any

LEAD_S = 0.1  # between the last process ready and the start: every waiter sees the time before it comes


class StartLine:
    def __init__(self, ctx: Any, parties: int) -> None:
        self.parties = parties
        self._ready = ctx.Semaphore(0)
        self._start_at = ctx.Value("d", 0.0)

    @classmethod
    def at_once(cls, ctx: Any) -> StartLine:
        """One already started: a load process's function run in the caller's own process."""
        line = cls(ctx, 0)
        line._start_at.value = time.time()
        return line

    def wait(self) -> float:
        """In a load process, once set up: until the run starts; its start time (``time.time``)."""
        self._ready.release()
        while (start_at := self._start_at.value) == 0.0 or time.time() < start_at:
            time.sleep(0.001)
        return float(start_at)

    def open(self, timeout_s: float) -> float:
        """In the parent: wait for every process to be set up, then start; the start time. Raises
        RuntimeError when one is not set up within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        for _ in range(self.parties):
            if not self._ready.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise RuntimeError(f"a load process was not set up within {timeout_s:.0f} s")
        start_at = time.time() + LEAD_S
        self._start_at.value = start_at
        return start_at
