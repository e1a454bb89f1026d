"""A queue as a ``Consumer`` follows it: where the application is, where the next pull starts, the
batches pulled and not handed over yet (bounded by the consumer's prefetch), and what is committed."""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from mqstore.ipc.wire.messages import MessageBatch

# the queue is at its end (a long poll ran out): the next pull starts at the same offset
_NOTHING_NEW = frozenset({"OFFSET_OVERFLOW_ONE", "NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE"})


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

    def absorb(self, status: str, next_offset: int, batch: MessageBatch) -> None:
        """A pull's answer for this queue: what it brought held, where the next pull starts moved."""
        if status not in _NOTHING_NEW:
            # FOUND moves past what came; NO_MATCHED_MESSAGE past what was filtered out; the
            # OFFSET_* corrections (too small, overflow, removed) to where the queue really is
            self.fetch_offset = next_offset
        batch = batch.since(self.position)
        if batch:
            self.hold(batch)
        if not self.buffered:
            self.position = self.fetch_offset

    def clear(self) -> None:
        self.buffered.clear()
        self.buffered_count = self.buffered_bytes = 0


def commit_positions(lock: threading.RLock, states: list[QueueState],
                     commit: Callable[[QueueState], Future[dict[str, Any]]]) -> Future[None]:
    """Store the positions not committed yet (``commit`` sends one queue's); the future completes when
    every one is stored, each queue's ``committed`` moved as its reply comes (under ``lock``)."""
    with lock:
        calls = [(s, s.position, commit(s)) for s in states if s.position != s.committed]
    outer: Future[None] = Future()
    left = [len(calls)]
    if not calls:
        outer.set_result(None)

    def committed(state: QueueState, position: int, call: Future[dict[str, Any]]) -> None:
        error = call.exception()
        with lock:
            if error is None:
                state.committed = position  # replies come in the order the commits went out
            left[0] -= 1
            last = left[0] == 0
        if error is not None and not outer.done():
            outer.set_exception(error)
        elif last and not outer.done():
            outer.set_result(None)

    for state, position, call in calls:
        call.add_done_callback(functools.partial(committed, state, position))
    return outer


def take_from(states: Iterable[QueueState], max_count: int | None) -> MessageBatch:
    """Up to ``max_count`` (all, with None) buffered messages, queue after queue, each queue's in order;
    positions moved past what is taken (and past what the tag filter skipped, once a queue is empty)."""
    taken: list[MessageBatch] = []
    room = max_count
    for state in states:
        while state.buffered and (room is None or room > 0):
            batch = state.take()
            if room is not None and len(batch) > room:
                state.put_back(batch[room:])
                batch = batch[:room]
            taken.append(batch)
            state.position = batch.queue_offset(-1) + 1
            room = None if room is None else room - len(batch)
        if not state.buffered:
            state.position = state.fetch_offset
    return MessageBatch.join(taken) if taken else MessageBatch.empty()
