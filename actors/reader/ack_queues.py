"""The ack-mode queues one reader owns, at ``{store}/queueindex/{group}/{topic}/{queue}/``.

Ownership is ``mqstore.ipc.wire.receipts.ack_owner``: exactly one reader holds each queue index and its in-flight
table (``mqstore.actors.reader.ack_queue``), so no message is in two consumers' hands at once. A queue opens
on first use and recovers from its journal; a change of one that fails leaves its memory out of
step with its files, so it is forgotten and the next use reopens and recovers it; a clean stop
closes every queue clean.

The oldest message the owned queues hold unacked, opened or not, is this reader's low-water mark
(``mqstore.engine.ackindex.low_water``), which retention's ``keep_unacked`` reads; with ``reclaim_consumed``
the mark also carries each queue's progress (``AckProgress``), which ``mqstore.engine.reclaim.consumed`` reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TypeVar

from mqstore.actors.config import BrokerSection
from mqstore.actors.reader.ack_queue import AckQueue, phys_offset_of
from mqstore.actors.reader.ack_requests import AckKey
from mqstore.engine.ackindex.deletion import delete_queue_index
from mqstore.engine.ackindex.files import QueueIndexError
from mqstore.engine.ackindex.low_water import (
    QUEUE_INDEX_DIR,
    STRAGGLERS_LISTED,
    AckProgress,
    queue_index_keys,
    write_low_water,
)
from mqstore.engine.delay.table import DelayLevels
from mqstore.ipc.wire import receipts
from mqstore.ipc.wire.requests.metadata import AckMark

log = logging.getLogger("mqstore")

T = TypeVar("T")


class AckQueues:
    def __init__(self, store_dir: Path, reader_index: int, cfg: BrokerSection, *, host_prefix: bytes,
                 now_ms: Callable[[], int], redelivery_delays_ms: tuple[int, ...] = (),
                 moved: Mapping[int, tuple[int, int]] | None = None,
                 holds: Callable[[AckKey, int, int, int], bool] | None = None) -> None:
        """``moved``: where moved messages are now (``mqstore.actors.reader.moved.MovedCopies.latest``).
        ``holds(key, seq, phys_offset, size)``: whether the commitlog holds the queue's message ``seq``
        there; a queue's recovery replays its journal only up to a publish that fails it (a torn page)."""
        self.store_dir = store_dir
        self.root = store_dir / QUEUE_INDEX_DIR
        self.reader_index = reader_index
        self.cfg = cfg
        self.host_prefix = host_prefix
        self.now_ms = now_ms
        self.redelivery_delays_ms = redelivery_delays_ms
        self.moved = moved
        self.holds = holds
        self._open: dict[AckKey, AckQueue] = {}
        self._last_op_ms: dict[AckKey, int] = {}
        self._low_water: tuple[int | None, list[AckProgress] | None] | None = None  # the mark last written

    def __len__(self) -> int:
        return len(self._open)

    def owner(self, key: AckKey) -> int:
        return receipts.ack_owner(*key, self.cfg.readers)

    def opened(self, key: AckKey) -> AckQueue | None:
        """The queue if it is open, without looking at the disk."""
        return self._open.get(key)

    def items(self) -> list[tuple[AckKey, AckQueue]]:
        return list(self._open.items())

    def get(self, key: AckKey, *, create: bool) -> AckQueue | None:
        """The queue, opened (and recovered) if need be; None when it has no index yet and not ``create``."""
        q = self._open.get(key)
        if q is not None:
            return q
        directory = self.root / key[0] / key[1] / str(key[2])
        if not create and not directory.is_dir():
            return None
        holds = self.holds
        q = AckQueue.open(directory, host_prefix=self.host_prefix, max_deliveries=self.cfg.ack_max_deliveries,
                          max_journal_entries=self.cfg.ack_max_journal_entries,
                          redelivery_delays_ms=self.redelivery_delays_ms, moved=self.moved,
                          check_publish=None if holds is None else
                          lambda seq, pub: holds(key, seq, phys_offset_of(pub.msg_id), pub.size_bytes))
        log.info("ack mode: opened %s/%s/%d (%s recovery): %d unacked, %d due again", *key,
                 q.index.recovery.kind.name.lower(), q.index.unacked_count, q.retry_count)
        self._open[key] = q
        self._last_op_ms[key] = self.now_ms()
        return q

    def used(self, key: AckKey, now_ms: int) -> None:
        """A client used the queue at ``now_ms``: it is not idle."""
        self._last_op_ms[key] = now_ms

    def idle_ms(self, key: AckKey, now_ms: int) -> int:
        return now_ms - self._last_op_ms.get(key, now_ms)

    def guarded(self, key: AckKey, change: Callable[[], T]) -> T:
        """Run a change of a queue's index; if it fails, the memory no longer matches the files:
        forget the queue (the next request reopens it and recovers) and let the fault be reported."""
        try:
            return change()
        except (QueueIndexError, OSError):
            q = self._open.pop(key, None)
            if q is not None:
                q.close(clean=False)
            raise

    def take_marks(self, marks: Iterable[AckMark], queue_end: Callable[[str, int], int]
                   ) -> tuple[int, int, list[AckMark]]:
        """Another copy's ack marks (a slave's master's) taken in for the queues this reader owns: each
        acked below its mark (``AckQueue.ack_below``: durable, never backwards), and never past
        ``queue_end(topic, queue)`` here, where it stops until the log caught up (a queue without an
        index gets one). Returns how many queues moved, the messages acked, and the marks held back."""
        moved = acked = 0
        clamped: list[AckMark] = []
        for group, topic, queue_id, mark in marks:
            key = (group, topic, queue_id)
            if self.owner(key) != self.reader_index:
                continue
            end = queue_end(topic, queue_id)
            if mark > end:
                clamped.append((group, topic, queue_id, end))
                mark = end
            try:
                q = self.get(key, create=mark > 0)
                if q is None or min(q.unacked_located(), default=q.scan_from) >= mark:
                    continue  # acked that far already (``op_ack_marks``'s mark): never backwards
                acked += self.guarded(key, partial(q.ack_below, mark))
            except (QueueIndexError, OSError) as exc:
                log.warning("ack mode: %s/%s/%d not moved to the master's mark %d: %s", *key, mark, exc)
                continue
            moved += 1
        return moved, acked, clamped

    def close_one(self, key: AckKey) -> None:
        """Close one queue clean and forget it (one opened only to be looked at)."""
        q = self._open.pop(key, None)
        self._last_op_ms.pop(key, None)
        if q is not None:
            q.close(clean=True)

    def delete(self, key: AckKey) -> bool:
        """A deleted group's queue: closed and its index removed durably
        (``mqstore.engine.ackindex.deletion``); whether it had one."""
        q = self._open.pop(key, None)
        self._last_op_ms.pop(key, None)
        if q is not None:
            q.close(clean=False)  # its files go next: nothing of them needs writing
        return delete_queue_index(self.store_dir, key)

    # -- the low-water mark ------------------------------------------------------------------------

    def owned_on_disk(self) -> list[AckKey]:
        """Every (group, topic, queue) index directory this reader owns, opened or not."""
        return [key for key in queue_index_keys(self.store_dir) if self.owner(key) == self.reader_index]

    def low_water_phys(self) -> int | None:
        """The commitlog offset of the oldest message any owned group has not acked (None: none)."""
        low: int | None = None
        for key in self.owned_on_disk():
            q = self.get(key, create=False)
            phys = q.lowest_unacked_phys() if q is not None else None
            if phys is not None:
                low = phys if low is None else min(low, phys)
        return low

    def progress(self, file_size: int, *, stragglers: bool = False) -> list[AckProgress]:
        """How far each owned group got on each queue, with its unacked messages per commitlog file
        and (``stragglers``) where those of its lowest file are, when there are few enough."""
        out = []
        for key in self.owned_on_disk():
            q = self.get(key, create=False)
            if q is None:
                continue
            held = q.unacked_located()
            by_file: dict[int, int] = {}
            for phys, _ in held.values():
                by_file[phys - phys % file_size] = by_file.get(phys - phys % file_size, 0) + 1
            listed: tuple[tuple[int, int], ...] = ()
            if stragglers and by_file and by_file[lowest := min(by_file)] <= STRAGGLERS_LISTED:
                listed = tuple(sorted(loc for loc in held.values() if lowest <= loc[0] < lowest + file_size))
            out.append(AckProgress(*key, min(held) if held else q.scan_from, q.scan_from, by_file, listed))
        return out

    def write_low_water(self, progress_file_size: int | None = None, *, stragglers: bool = False) -> None:
        """This reader's mark, written when it moved: what retention must keep with ``keep_unacked``,
        and with ``progress_file_size`` (``reclaim_consumed``) each queue's progress too."""
        mark = (self.low_water_phys(),
                None if progress_file_size is None else self.progress(progress_file_size, stragglers=stragglers))
        if mark != self._low_water:
            write_low_water(self.store_dir, self.reader_index, *mark)
            self._low_water = mark

    def close(self) -> None:
        """Close every queue clean (in-flight messages are delivered-unacked in its index, so they
        come back redelivered); one that fails to close recovers on its next open."""
        failed: BaseException | None = None
        for q in self._open.values():
            try:
                q.close(clean=True)
            except (QueueIndexError, OSError) as exc:
                failed = exc  # the others still close
        self._open.clear()
        if failed is not None:
            raise failed


def redelivery_delays(levels: DelayLevels, first_level: int) -> tuple[int, ...]:
    """The wait before a failed delivery comes back, by deliveries so far (n: index n - 1): the delay of
    level ``first_level + n - 1`` (the table's last past it), as RocketMQ retries consumers through
    levels 3 + reconsume times; ``first_level`` 0: at once."""
    if first_level <= 0:
        return ()
    last = max(first_level, levels.max_level)
    return tuple(levels.delay_ms(level) for level in range(first_level, last + 1))
