"""A queue as a ``Consumer`` follows it: where the application is, where the next pull starts, and
the batches pulled and not handed over yet (bounded by the consumer's prefetch)."""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mqstore.ipc.wire.messages import MessageBatch


@dataclass(slots=True)
class QueueState:
    queue: int
    route: str
    position: int                       # next offset not yet handed to the application
    fetch_offset: int                   # next offset to ask a reader for
    committed: int                      # what the group's offset is known to be
    buffered: deque[MessageBatch] = field(default_factory=deque)  # none of them empty
    buffered_count: int = 0             # messages in ``buffered``
    buffered_bytes: int = 0             # their bytes as stored
    in_flight: Future[dict[str, Any]] | None = None
    retry_at_ms: int = 0
    pulled_us: int = 0                  # wall clock as the pull in flight was sent (traced consumers)

    def hold(self, batch: MessageBatch) -> None:
        self.buffered.append(batch)
        self.buffered_count += len(batch)
        self.buffered_bytes += batch.stored_bytes

    def take(self) -> MessageBatch:
        batch = self.buffered.popleft()
        self.buffered_count -= len(batch)
        self.buffered_bytes -= batch.stored_bytes
        return batch

    def put_back(self, batch: MessageBatch) -> None:
        self.buffered.appendleft(batch)
        self.buffered_count += len(batch)
        self.buffered_bytes += batch.stored_bytes

    def clear(self) -> None:
        self.buffered.clear()
        self.buffered_count = self.buffered_bytes = 0
