"""SYNC_FLUSH on the writer's side: answers and dispatch batches held until the flush is known.

A round appended under SYNC_FLUSH publishes ``written`` with ``sync`` set; the flush service fsyncs
at once and publishes ``flushed``, and one fsync serves every waiter up to that offset (group commit).
Until then each answer waits here as a ``PendingSync`` and each batch as its ``dispatch`` notice, so
no builder makes a record visible before it is durable. A ``flushed`` notice that covers them
releases the batches first, then the answers, in the order they were written; an answer that waited
past the sync timeout is sent as FLUSH_DISK_TIMEOUT (the record is in the log and becomes visible
once flushed). ``flushed`` notices come in either flush mode: ``flushed_end`` is reported on every tick.

A writer that starts after a crash of its predecessor finds records past what the builders applied:
the tail that writer appended and held for its flush, maybe never synced. Under SYNC_FLUSH it is
held here too (``hold_tail``): ``tick`` lets the builders read it from the commitlog only once a
``flushed`` notice covers it, so no consumer sees a record a power cut could still take.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.writer.outlets import Outlets
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Dispatch, Flushed
from mqstore.ipc.wire.replies import SendEncodedReply, SendReply

log = logging.getLogger("mqstore")


@dataclass(slots=True)
class PendingSync:
    end: int                 # acknowledged once flushed reaches this
    deadline_ms: int
    identity: bytes
    request_id: Any
    reply: SendReply | SendEncodedReply
    held_s: float = field(default_factory=time.perf_counter)  # from here to its answer: its send latency


class SyncWaiters:
    """How far the commitlog is flushed, and what waits for it to reach further."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.flushed_end = 0
        self.pending: deque[PendingSync] = deque()
        self.undispatched: deque[Dispatch] = deque()
        self.tail_end = 0  # a recovered tail below it waits for its flush before builders may apply it

    def __len__(self) -> int:
        """Answers waiting for a flush."""
        return len(self.pending)

    @property
    def flush_wanted(self) -> bool:
        """Whether something waits for a flush: the flush service is asked to flush at once."""
        return bool(self.pending) or self.tail_end > 0

    def hold_tail(self, end: int) -> None:
        """The records up to ``end``, found on start past what the builders applied, are published
        to them only once flushed."""
        self.tail_end = end

    def on_flushed(self, flushed_in: zmq.Socket[Any]) -> None:
        """Take every ``flushed`` notice waiting on the socket."""
        while True:
            try:
                _, frame = flushed_in.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                self.flushed_end = max(self.flushed_end, Flushed.decode(frame).end)
            except schema.SchemaError:
                log.warning("ignoring a malformed flushed notice")

    def hold(self, end: int, identity: bytes, request_id: Any, reply: SendReply | SendEncodedReply) -> None:
        """A send's reply waits for the flush to reach ``end``."""
        self.pending.append(PendingSync(end, monotonic_ms() + self.timeout_ms, identity, request_id, reply))

    def hold_dispatch(self, notice: Dispatch) -> None:
        self.undispatched.append(notice)

    def release(self, outlets: Outlets) -> None:
        """Publish and answer what the flush covers, time out what waited too long."""
        if 0 < self.tail_end <= self.flushed_end:  # before any batch: they all come after it
            outlets.progress.dispatched_end = max(outlets.progress.dispatched_end, self.tail_end)
            self.tail_end = 0
        while self.undispatched and self.undispatched[0].to_phys <= self.flushed_end:
            outlets.dispatch(self.undispatched.popleft())
        now = monotonic_ms()
        while self.pending and (self.pending[0].end <= self.flushed_end or self.pending[0].deadline_ms <= now):
            p = self.pending.popleft()
            reply = p.reply.flush_timed_out() if p.end > self.flushed_end else p.reply
            outlets.reply(p.identity, reply.encode(p.request_id))
            outlets.progress.send_latency.observe(time.perf_counter() - p.held_s)

    def drain(self, outlets: Outlets, flushed_in: zmq.Socket[Any]) -> None:
        """On stop, give waiting sends their flush, or their timeout: never wait longer than the sync
        timeout (the flush service may be gone). Batches still not dispatched are read back from the
        commitlog by the builders, or by the supervisor's final catch-up."""
        deadline = monotonic_ms() + self.timeout_ms
        while (self.pending or self.undispatched) and monotonic_ms() < deadline:
            if flushed_in.poll(50):
                self.on_flushed(flushed_in)
            self.release(outlets)
        self.release(outlets)
        self.undispatched.clear()
