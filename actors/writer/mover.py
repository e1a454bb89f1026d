"""Retention's ``move_stragglers_below`` inside the writer (RabbitMQ's merge): after each reclamation
round, the oldest held commitlog file whose only holders are a few unacked messages of ack-mode
groups (``mqstore.engine.reclaim.consumed.plan_move``) has them copied to the head of the log, on
``mqstore.engine.reclaim.move.MOVED_TOPIC``.

The order that makes a crash at any point lose nothing:

1. the copies are appended and made durable (``msync`` of their range) ...
2. ... then dispatched like any record (under SYNC_FLUSH after the flush service's notice, in order
   with the sends held before them): the moved topic's consume queue is the record of the move;
3. each reader reads it (``mqstore.actors.reader.moved``) and reads those messages from the copies;
4. its next mark counts them in the copies' file;
5. the next reclamation round finds the old file held by nothing and deletes it.

A copy nobody reads (the writer killed before its dispatch, then the builder dispatches it from
the log) is an orphan: it holds nothing and goes with its file. A straggler copied is not copied
again for ``IN_TRANSIT_MS`` while the marks catch up; at most ``ROUND_BYTES`` are copied a round,
the rest of the file the rounds after.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.writer.outlets import Outlets
from mqstore.actors.writer.state import WriterState
from mqstore.engine.batch.dispatch import DispatchBatch
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.range_sync import RangeSync
from mqstore.engine.log.record import DecodeKind, Record
from mqstore.engine.reclaim.consumed import HeldFile, plan_move
from mqstore.engine.reclaim.move import MOVED_QUEUE_ID, copy_message
from mqstore.ipc.wire.notices import Dispatch, Written

log = logging.getLogger("mqstore")

ROUND_BYTES = 8 << 20     # copied at most per round
IN_TRANSIT_MS = 30_000    # a straggler copied is not copied again before the marks could count its copy


class StragglerMover:
    def __init__(self, state: WriterState) -> None:
        self.state = state
        self.share = state.config.retention.move_stragglers_below
        self._in_transit: dict[int, int] = {}  # commitlog offset copied from -> when it may be copied again
        self.moved_messages = 0
        self.moved_bytes = 0     # bytes of the copies appended
        self.files_moved = 0     # files whose every straggler was copied (the reclamation rounds delete them)

    def stats(self) -> dict[str, Any]:
        return {"messages": self.moved_messages, "bytes": self.moved_bytes, "files": self.files_moved}

    def round(self, files: Sequence[HeldFile], outlets: Outlets) -> int:
        """Copy the stragglers of the oldest file, if it has only few; returns how many were copied."""
        plan = plan_move(files, self.share)
        now = monotonic_ms()
        self._in_transit = {phys: until for phys, until in self._in_transit.items() if until > now}
        if plan is None or self.state.disk.full:
            return 0
        commitlog = self.state.writer.commitlog
        todo: list[Record] = []
        budget = ROUND_BYTES
        for phys_offset, size in plan.stragglers:
            if phys_offset in self._in_transit or budget < size:
                continue
            decoded = commitlog.read_record(phys_offset)
            if decoded.kind is not DecodeKind.RECORD or decoded.record is None or decoded.record.size != size:
                log.warning("reclaim: no record of %d bytes at %d to move; left where it is", size, phys_offset)
                continue
            todo.append(decoded.record)
            budget -= size
        if not todo:
            return 0
        appended = self._append(commitlog, todo, outlets)
        for record, ok in zip(todo, appended, strict=True):
            if ok:
                self._in_transit[record.phys_offset] = now + IN_TRANSIT_MS
        copied = sum(appended)
        if copied and all(phys in self._in_transit for phys, _ in plan.stragglers):
            self.files_moved += 1
        log.info("reclaim: %d of %d straggler(s) holding commitlog file %d copied to the head of the log",
                 copied, len(plan.stragglers), plan.file_base)
        return copied

    def _append(self, commitlog: CommitLog, records: list[Record], outlets: Outlets) -> list[bool]:
        """Append, sync and dispatch copies of ``records``; whether each was appended."""
        start = commitlog.max_offset
        outcome = self.state.writer.write([copy_message(r) for r in records], [MOVED_QUEUE_ID] * len(records),
                                          wall_ms())
        end = commitlog.max_offset
        refused = [r for r in outcome.results if not r.ok]
        if refused:
            log.warning("reclaim: %d copies not appended: %s", len(refused), refused[0].reason)
        if not outcome.requests:
            return [False] * len(records)
        _sync(commitlog, start, end)  # durable before any reader can learn of them
        self.moved_messages += len(outcome.requests)
        self.moved_bytes += sum(r.size for r in outcome.requests)
        notice = Dispatch(start, end, DispatchBatch.from_requests(outcome.requests))
        if self.state.config.sync_flush:
            outlets.written(Written(end, outcome.store_ms, True))
        if self.state.waiters.holds_dispatch:  # in order with the sends waiting for their flush or copies
            self.state.waiters.hold_dispatch(notice)
        else:
            outlets.dispatch(notice)
        outlets.progress.last_store_ms = outcome.store_ms
        return [r.ok for r in outcome.results]


def _sync(commitlog: CommitLog, start: int, end: int) -> None:
    """msync [start, end) of the commitlog; an OSError propagates (the writer stops: a failed flush)."""
    for mf in list(commitlog.queue.iter_from(start)):
        if mf.file_base >= end:
            break
        ranged = RangeSync(mf.path, mf.file_size)
        try:
            ranged.sync(max(start, mf.file_base) - mf.file_base, min(end, mf.file_end) - mf.file_base)
        finally:
            ranged.close()
