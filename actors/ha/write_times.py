"""When the master learned how far its log was written: the clock a slave's lag in time is read from.

A slave's lag in bytes is the master's end less its acknowledged end. Its lag in time is how long
the first byte it lacks has been written on the master: ``now`` less the time of the first sample
whose end passes the slave's acknowledged end (0 once the slave holds the whole log). A sample
``(end, ms)`` says that by ``ms`` (monotonic) the master's HA actor knew the log was written below
``end``; it learns that from the writer's ``written`` notices, so the figure is as late as a notice
(one writer round) and never counts what the writer has not published.

Samples closer than ``resolution_ms`` are merged into the earlier one (its end moves up, its time
stays), so the lag may read up to ``resolution_ms`` high, never low, and under any write rate at most
``1000 / resolution_ms`` samples a second are kept. Samples every connected slave is past are
dropped; at most ``max_samples`` are kept, so a slave behind every sample kept (or one that connects
with an end older than this actor's first notice) reads the age of the oldest sample: "at least".
"""

from __future__ import annotations

from collections import deque

RESOLUTION_MS = 20
MAX_SAMPLES = 30_000  # ten minutes of continuous writes at the resolution


class WriteTimes:
    def __init__(self, resolution_ms: int = RESOLUTION_MS, max_samples: int = MAX_SAMPLES) -> None:
        self.resolution_ms = resolution_ms
        self.samples: deque[tuple[int, int]] = deque(maxlen=max_samples)  # (end, ms), both increasing

    def note(self, end: int, now_ms: int) -> None:
        """The log is written below ``end`` as of ``now_ms``."""
        if self.samples:
            last_end, last_ms = self.samples[-1]
            if end <= last_end:
                return
            if now_ms - last_ms < self.resolution_ms:
                self.samples[-1] = (end, last_ms)
                return
        self.samples.append((end, now_ms))

    def lag_ms(self, acked: int, now_ms: int) -> int:
        """How long the first byte not held below ``acked`` has been written; 0 when nothing is missing."""
        if not self.samples or self.samples[-1][0] <= acked:
            return 0
        for end, ms in self.samples:  # the oldest first: what every copy is past is dropped
            if end > acked:
                return max(0, now_ms - ms)
        raise AssertionError("the last sample passes acked")

    def forget_below(self, acked: int) -> None:
        """Drop the samples every copy is past (``acked``: the lowest acknowledged end)."""
        while self.samples and self.samples[0][0] <= acked:
            self.samples.popleft()
