"""The enqueue's progress, live in memory, and what of it reaches ``config/timercheck``.

The walk of the timer topic's queue reads records from the page cache, before the flush service has
them on the disk, and the checkpoint's ``next_queue_offset`` and ``log_flushed_pos`` are stores into
a mapping the kernel may write back at any moment. Written at once, a power cut could keep them past
records it lost: the timer topic's sends after recovery take the lost queue offsets again, and a walk
starting past them never enqueues them. So the marks wait here, each with the commitlog end of the
records it counts (``mqstore.actors.flushed``), and the newest one the flush covers reaches the
mapping at the timer's next flush, behind the timerlog and wheel flush that makes its records
durable (``mqstore.engine.timer.store.TimerStore.flush``).
"""

from __future__ import annotations

from mqstore.actors.flushed import DurableGate
from mqstore.engine.timer.store import EnqueueMark


class Enqueued:
    def __init__(self, next_queue_offset: int, needed_end: int) -> None:
        self.next_queue_offset = next_queue_offset
        self.needed_end = needed_end  # past the last commitlog record counted
        self.gate: DurableGate[EnqueueMark] = DurableGate()

    def counted(self, next_queue_offset: int, record_end: int) -> None:
        """Every entry before ``next_queue_offset`` is enqueued; its record ends at ``record_end``."""
        self.next_queue_offset = next_queue_offset
        self.needed_end = max(self.needed_end, record_end)

    def offer(self, log_pos: int) -> None:
        """The state now (the timerlog holding its records up to ``log_pos``) waits for the flush."""
        self.gate.offer(self.needed_end, EnqueueMark(self.next_queue_offset, log_pos))

    def on_flushed(self, flushed_end: int) -> None:
        self.gate.on_flushed(flushed_end)

    def take(self) -> EnqueueMark | None:
        """The newest state the commitlog's flush covers, for the checkpoint (None: nothing new)."""
        return self.gate.take()
