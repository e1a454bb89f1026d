"""Parked pulls: RocketMQ's PullRequestHoldService without its thread, for plain and ack-mode pulls.

A pull that finds nothing yet waits here, indexed by its queue (woken by ``arrived``) and by its
deadline (a heap, so the reader's poll timeout is the nearest deadline and nothing spins). Heap
entries of pulls already taken are skipped when they come up. Every ``RECHECK_PARKED_MS`` a queue
waited on is read off its files, in case a notice was lost.

``ParkedPulls`` holds plain pulls and spanning ones (``pull_queues``, parked under every queue they
name): waking takes every pull of a queue out (a spanning one out of all its queues); the reader
runs each again and parks back those that still find nothing. ``ParkedAckPulls`` holds ``ack_pull``s (and spanning ones,
``ack_pull_queues``, under every queue they name), per (group, topic, queue) in the order they came:
waking serves them oldest first and takes out only those answered (a spanning one out of all its
queues), so one that still finds nothing keeps its place in line.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from mqstore.actors.reader.ack_requests import AckKey, AckPull, AckSpan
from mqstore.actors.reader.state import QueueKey
from mqstore.engine.read.lookup import GetResult, GetStatus, PullLimits, TagFilter

MAX_PARKED = 65_536        # per table; beyond this a pull is answered at once: clients cannot make the reader hoard
RECHECK_PARKED_MS = 2_000  # a queue waited on is read off its files this often (lost notices)

_NOTHING_YET = frozenset({GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE,
                          GetStatus.NO_MATCHED_LOGIC_QUEUE})


@dataclass(frozen=True, slots=True)
class PullRequest:
    group: str
    topic: str
    queue_id: int
    queue_offset: int
    limits: PullLimits
    tag_filter: TagFilter
    raw: bool = False  # answer with the stored records back to back and their columns, instead of maps
    trace: bool = False  # stamp the reply with the reader's wall clock (mqstore bench trace)


@dataclass(frozen=True, slots=True)
class ParkedPull:
    identity: bytes
    request_id: Any
    pull: PullRequest
    deadline_ms: int

    @property
    def key(self) -> QueueKey:
        return (self.pull.topic, self.pull.queue_id)

    @property
    def keys(self) -> tuple[QueueKey, ...]:
        return (self.key,)

    def after(self, result: GetResult) -> ParkedPull:
        """Waiting on after ``result``: past entries the tag filter skipped, if any."""
        if result.status is GetStatus.NO_MATCHED_MESSAGE:
            return replace(self, pull=replace(self.pull, queue_offset=result.next_queue_offset))
        return self


@dataclass(frozen=True, slots=True)
class SpanRequest:
    """A pull of several queues of one topic (``pull_queues``): ``limits`` bound each queue's part."""

    group: str
    topic: str
    queues: tuple[tuple[int, int], ...]  # (queue id, queue offset)
    limits: PullLimits
    tag_filter: TagFilter
    trace: bool = False


@dataclass(frozen=True, slots=True)
class ParkedSpan:
    identity: bytes
    request_id: Any
    span: SpanRequest
    deadline_ms: int

    @property
    def keys(self) -> tuple[QueueKey, ...]:
        return tuple((self.span.topic, queue_id) for queue_id, _ in self.span.queues)

    def after(self, results: list[tuple[int, GetResult]]) -> ParkedSpan:
        """Waiting on after ``results``: each queue past the entries the tag filter skipped, if any."""
        moved = {q: r.next_queue_offset for q, r in results if r.status is GetStatus.NO_MATCHED_MESSAGE}
        if not moved:
            return self
        queues = tuple((q, moved.get(q, queue_offset)) for q, queue_offset in self.span.queues)
        return replace(self, span=replace(self.span, queues=queues))


Parked: TypeAlias = "ParkedPull | ParkedSpan"


def is_waitable(result: GetResult) -> bool:
    """Nothing there yet: the queue is at its end (or does not exist), or everything up to its end
    was filtered out."""
    if result.message_count:
        return False
    if result.status in _NOTHING_YET:
        return True
    return result.status is GetStatus.NO_MATCHED_MESSAGE and result.next_queue_offset >= result.max_queue_offset


class ParkedPulls:
    def __init__(self, capacity: int = MAX_PARKED) -> None:
        self.capacity = capacity
        self._live: dict[int, Parked] = {}
        self._by_queue: dict[QueueKey, dict[int, Parked]] = {}
        self._deadlines: list[tuple[int, int]] = []  # (deadline_ms, seq)
        self._recheck_at: dict[QueueKey, int] = {}    # when to read a waited-on queue off its files
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    @property
    def full(self) -> bool:
        return len(self._live) >= self.capacity

    def park(self, parked: Parked, now_ms: int, recheck_ms: int) -> None:
        seq = next(self._seq)
        self._live[seq] = parked
        for key in parked.keys:
            self._by_queue.setdefault(key, {})[seq] = parked
            self._recheck_at.setdefault(key, now_ms + recheck_ms)
        heapq.heappush(self._deadlines, (parked.deadline_ms, seq))

    def take(self, key: QueueKey) -> list[Parked]:
        """Every pull parked on ``key``, oldest first, no longer parked (under any of its queues)."""
        waiting = self._by_queue.pop(key, {})
        self._recheck_at.pop(key, None)
        for seq, parked in waiting.items():
            del self._live[seq]
            self._unlist(seq, parked, key)
        return list(waiting.values())

    def _unlist(self, seq: int, parked: Parked, done: QueueKey | None = None) -> None:
        """Take ``parked`` off its queues' lists (but ``done``'s, already gone)."""
        for key in parked.keys:
            if key == done:
                continue
            waiting = self._by_queue[key]
            del waiting[seq]
            if not waiting:
                del self._by_queue[key]
                del self._recheck_at[key]

    def due_for_recheck(self, now_ms: int, recheck_ms: int) -> list[QueueKey]:
        """Queues waited on for ``recheck_ms`` since they were last read off the files (RocketMQ's
        PullRequestHoldService checks its held requests the same way, in case a notice was lost)."""
        due = [key for key, at_ms in self._recheck_at.items() if at_ms <= now_ms]
        for key in due:
            self._recheck_at[key] = now_ms + recheck_ms
        return due

    def expired(self, now_ms: int) -> Iterator[Parked]:
        """Take out the pulls whose deadline has come."""
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, seq = heapq.heappop(self._deadlines)
            parked = self._live.pop(seq, None)
            if parked is None:
                continue  # woken earlier
            self._unlist(seq, parked)
            yield parked

    def ms_to_next_deadline(self, now_ms: int, cap_ms: int) -> int:
        while self._deadlines and self._deadlines[0][1] not in self._live:
            heapq.heappop(self._deadlines)
        if not self._deadlines:
            return cap_ms
        return max(0, min(cap_ms, self._deadlines[0][0] - now_ms))

    def drain(self) -> list[Parked]:
        everything = list(self._live.values())
        self._live.clear()
        self._by_queue.clear()
        self._deadlines.clear()
        self._recheck_at.clear()
        return everything


@dataclass(frozen=True, slots=True)
class ParkedAckPull:
    identity: bytes
    request_id: Any
    pull: AckPull
    deadline_ms: int

    @property
    def keys(self) -> tuple[AckKey, ...]:
        return (self.pull.key,)

    @property
    def consumer(self) -> str:
        return self.pull.consumer


@dataclass(frozen=True, slots=True)
class ParkedAckSpan:
    """An ``ack_pull_queues`` waiting under every queue it names."""

    identity: bytes
    request_id: Any
    span: AckSpan
    deadline_ms: int

    @property
    def keys(self) -> tuple[AckKey, ...]:
        return self.span.keys

    @property
    def consumer(self) -> str:
        return self.span.consumer


ParkedAck: TypeAlias = "ParkedAckPull | ParkedAckSpan"


class ParkedAckPulls:
    def __init__(self, capacity: int = MAX_PARKED) -> None:
        self.capacity = capacity
        self._live: dict[int, ParkedAck] = {}
        self._by_key: dict[AckKey, dict[int, ParkedAck]] = {}  # each in the order parked
        self._deadlines: list[tuple[int, int]] = []            # (deadline_ms, seq)
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def __bool__(self) -> bool:
        return bool(self._live)  # asked every reader round

    @property
    def full(self) -> bool:
        return len(self._live) >= self.capacity

    def park(self, parked: ParkedAck) -> None:
        seq = next(self._seq)
        self._live[seq] = parked
        for key in parked.keys:
            self._by_key.setdefault(key, {})[seq] = parked
        heapq.heappush(self._deadlines, (parked.deadline_ms, seq))

    def waited_on(self) -> list[AckKey]:
        """The queues pulls are parked on."""
        return list(self._by_key)

    def waiting(self, key: AckKey) -> list[tuple[int, ParkedAck]]:
        """The pulls parked on ``key``, oldest first, each with the number ``unpark`` takes."""
        return list(self._by_key.get(key, {}).items())

    def unpark(self, key: AckKey, seq: int) -> None:
        """No longer parked (a spanning pull: under none of its queues)."""
        self._unlist(seq, self._live.pop(seq))

    def _unlist(self, seq: int, parked: ParkedAck) -> None:
        for key in parked.keys:
            waiting = self._by_key[key]
            del waiting[seq]
            if not waiting:
                del self._by_key[key]

    def take_consumer(self, key: AckKey, consumer: str) -> list[ParkedAck]:
        """Every pull ``consumer`` has parked on ``key``, oldest first, no longer parked."""
        taken = [(seq, parked) for seq, parked in self.waiting(key) if parked.consumer == consumer]
        for seq, _ in taken:
            self.unpark(key, seq)
        return [parked for _, parked in taken]

    def expired(self, now_ms: int) -> Iterator[ParkedAck]:
        """Take out the pulls whose deadline has come."""
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, seq = heapq.heappop(self._deadlines)
            parked = self._live.pop(seq, None)
            if parked is not None:
                self._unlist(seq, parked)
                yield parked

    def ms_to_next_deadline(self, now_ms: int, cap_ms: int) -> int:
        while self._deadlines and self._deadlines[0][1] not in self._live:
            heapq.heappop(self._deadlines)
        if not self._deadlines:
            return cap_ms
        return max(0, min(cap_ms, self._deadlines[0][0] - now_ms))

    def drain(self) -> list[ParkedAck]:
        everything = list(self._live.values())
        self._live.clear()
        self._by_key.clear()
        self._deadlines.clear()
        return everything
