"""Retries: an ack-mode queue's messages due again (``mqstore.actors.reader.ack_queue``).

A message comes back after a nack with requeue, a visibility timeout, a consumer that left, or (at a
restart) because it was delivered and not acked. It is handed out again before any fresh message,
lowest seq first, flagged redelivered. A failed delivery (a nack, a timeout) waits first, as
RocketMQ's retries wait on delay levels: after n deliveries ``delays_ms[n - 1]`` (the last one past
the table's end); a consumer that left gives its messages back at once.

Each message here has its place in the commitlog and how often it was delivered so far. Two heaps
keep the order (seqs due now; due times of those waiting) and skip their stale entries as they come
up: a message acked or dead-lettered meanwhile is only dropped from the maps.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import NamedTuple

Moves = Mapping[int, tuple[int, int]]  # a message's old commitlog offset -> its copy's offset and size


class Retry(NamedTuple):
    """A message due again: where it is and how many deliveries it had."""

    phys_offset: int
    size: int
    delivery_count: int


class Retries:
    def __init__(self, delays_ms: tuple[int, ...] = ()) -> None:
        self.delays_ms = delays_ms            # after n deliveries, [n - 1] (the last past its end)
        self._due: list[int] = []             # heap of seqs; stale ones skipped
        self._info: dict[int, Retry] = {}     # every message here, waiting or not
        self._waiting: dict[int, int] = {}    # seq -> when it is due (in _info)
        self._delayed: list[tuple[int, int]] = []  # heap of (due ms, seq); stale ones skipped

    def __len__(self) -> int:
        return len(self._info)

    def __contains__(self, seq: object) -> bool:
        return seq in self._info

    @property
    def has_due(self) -> bool:
        return len(self._info) > len(self._waiting)

    def get(self, seq: int) -> Retry | None:
        return self._info.get(seq)

    def items(self) -> Iterator[tuple[int, Retry]]:
        return iter(list(self._info.items()))

    def add(self, seq: int, retry: Retry, failed_at_ms: int | None = None) -> None:
        """Due again: at once, or (a failed delivery, ``failed_at_ms``) after its redelivery delay."""
        self._info[seq] = retry
        delays = self.delays_ms
        delay_ms = delays[min(retry.delivery_count, len(delays)) - 1] if delays and failed_at_ms is not None else 0
        if delay_ms > 0 and failed_at_ms is not None:
            self._waiting[seq] = failed_at_ms + delay_ms
            heapq.heappush(self._delayed, (failed_at_ms + delay_ms, seq))
        else:
            heapq.heappush(self._due, seq)

    def recovered(self, seq: int, retry: Retry) -> None:
        """Delivered and not acked before a restart: due at once (``heapify`` once all are in)."""
        self._info[seq] = retry
        self._due.append(seq)

    def heapify(self) -> None:
        heapq.heapify(self._due)

    def take(self, max_count: int) -> list[tuple[int, Retry]]:
        """Up to ``max_count`` messages due now, lowest seq first, taken out."""
        out: list[tuple[int, Retry]] = []
        while self._due and len(out) < max_count:
            seq = heapq.heappop(self._due)
            info = self._info.pop(seq, None) if seq not in self._waiting else None
            if info is not None:
                out.append((seq, info))
        return out

    def remove(self, seq: int) -> Retry | None:
        """Take ``seq`` out (acked, dead-lettered); its heap entries are skipped when they come up."""
        self._waiting.pop(seq, None)
        return self._info.pop(seq, None)

    def next_ms(self) -> int | None:
        """When the next waiting message is due (None: none waits)."""
        while self._delayed and self._waiting.get(self._delayed[0][1]) != self._delayed[0][0]:
            heapq.heappop(self._delayed)
        return self._delayed[0][0] if self._delayed else None

    def promote(self, now_ms: int) -> int:
        """Waiting messages due by ``now_ms`` become due; returns how many."""
        count = 0
        while self._delayed and self._delayed[0][0] <= now_ms:
            due_ms, seq = heapq.heappop(self._delayed)
            if self._waiting.get(seq) == due_ms:
                del self._waiting[seq]
                heapq.heappush(self._due, seq)
                count += 1
        return count

    def relocate(self, moves: Moves) -> int:
        """Messages at an offset in ``moves`` are read from their copies now; returns how many."""
        count = 0
        for seq, retry in list(self._info.items()):
            if retry.phys_offset in moves:
                self._info[seq] = Retry(*moves[retry.phys_offset], retry.delivery_count)
                count += 1
        return count
