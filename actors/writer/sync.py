"""The answers a writer holds: until the flush (SYNC_FLUSH), until enough copies (SYNC_MASTER), or both.

SYNC_FLUSH. A round appended under SYNC_FLUSH publishes ``written`` with ``sync`` set; the flush
service fsyncs at once and publishes ``flushed``, and one fsync serves every waiter up to that
offset (group commit). Until then each answer waits here as a ``PendingSync`` and each batch as its
``dispatch`` notice, so no builder makes a record visible before it is durable. A ``flushed`` notice
that covers them releases the batches first, then the answers, in the order they were written; an
answer that waited past the sync timeout is sent as FLUSH_DISK_TIMEOUT (the record is in the log and
becomes visible once flushed). ``flushed`` notices come in either flush mode: ``flushed_end`` is
reported on every tick.

SYNC_MASTER (``ReplicaWait``). A send's answer also waits for a ``replicated`` notice from the HA actor
whose ``end`` reaches the send's end: ``[ha] in_sync_replicas`` copies, the master's included, hold
it. Both waits run side by side, as RocketMQ's handleDiskFlushAndHA runs its two futures: the answer
goes once both are done, each by its notice or by its own timeout. Past ``[ha] slave_timeout_ms`` the
answer is FLUSH_SLAVE_TIMEOUT; when, at the send, fewer slaves are in sync than the copies need
(the last notice's ``in_sync``, or none heard for ``STALE_HEARTBEATS`` of the HA actor's heartbeats:
that actor is dead or not started), it is SLAVE_NOT_AVAILABLE without waiting for the slaves
(RocketMQ 4's isSlaveOK). A failed replica wait's status overwrites a failed flush's, as RocketMQ's
does. Either way the message is stored; only SEND_OK says the copies hold it.

What consumers see waits for the copies too (RocketMQ 5's confirm offset, ``readUnCommitted``
false): a SYNC_MASTER's batch is published to the builders once the ``replicated`` notice covers it
(and, under SYNC_FLUSH, the flush), or once no slave is in sync (the master's copy is then the only
one there is), or once its own slave timeout passed (it is answered FLUSH_SLAVE_TIMEOUT then: a slave
stuck in sync never hides records for longer). A record that only the master held would otherwise be
read by a group whose offset then runs past it, and after a failover the promoted slave gives that
queue offset to the next SEND_OK, which the group never reads.
``in_sync_replicas = 1`` waits for nobody (RocketMQ's default; mqstore's is 2). The broker's own
actors' sends (scheduler, timer, transactions) are answered on the flush alone: they copy
records whose originals were answered only once replicated.

A writer that starts after a crash of its predecessor finds records past what the builders applied:
the tail that writer appended and held for its flush, maybe never synced. Under SYNC_FLUSH it is
held here too (``hold_tail``): ``tick`` lets the builders read it from the commitlog only once a
``flushed`` notice covers it, so no consumer sees a record a power cut could still take.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.config import BrokerConfig
from mqstore.actors.config_ha import SYNC_MASTER
from mqstore.actors.writer.outlets import OWN_PEER, Outlets
from mqstore.engine.log.message import PutStatus
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Dispatch, Flushed, Replicated
from mqstore.ipc.wire.replies import SendEncodedReply, SendReply

log = logging.getLogger("mqstore")

STALE_HEARTBEATS = 3  # no ``replicated`` notice for this many HA heartbeats: no slave is known in sync
_PUT_OK = PutStatus.PUT_OK.value
_FLUSH_DISK_TIMEOUT = PutStatus.FLUSH_DISK_TIMEOUT.value
_FLUSH_SLAVE_TIMEOUT = PutStatus.FLUSH_SLAVE_TIMEOUT.value
_SLAVE_NOT_AVAILABLE = PutStatus.SLAVE_NOT_AVAILABLE.value
_UNBOUNDED = 1 << 62


@dataclass(frozen=True, slots=True)
class ReplicaWait:
    """SYNC_MASTER's rule: how many slaves must hold a send, how long to wait for them, and how old the
    HA actor's last word may be before no slave counts as in sync."""

    slaves: int       # [ha] in_sync_replicas - 1: the master holds one of the copies
    timeout_ms: int   # [ha] slave_timeout_ms
    stale_ms: int     # STALE_HEARTBEATS x [ha] heartbeat_interval_ms

    @classmethod
    def of(cls, config: BrokerConfig) -> ReplicaWait | None:
        """The rule of a SYNC_MASTER that needs a slave's copy; None for any other broker."""
        ha = config.ha
        if config.broker.role != SYNC_MASTER or ha.in_sync_replicas <= 1:
            return None
        return cls(ha.in_sync_replicas - 1, ha.slave_timeout_ms, STALE_HEARTBEATS * ha.heartbeat_interval_ms)


@dataclass(slots=True)
class PendingSync:
    end: int                 # the waits are done once the flush, and the copies, reach this
    identity: bytes
    request_id: Any
    reply: SendReply | SendEncodedReply
    flush_deadline_ms: int
    replica_deadline_ms: int = 0
    waits: int = 0           # of the two, how many still run: answered when none does
    status: str = _PUT_OK    # what its stored records are answered with: a failed wait's status
    held_s: float = field(default_factory=time.perf_counter)  # from here to its answer: its send latency


class SyncWaiters:
    """How far the commitlog is flushed and replicated, and the answers that wait for either to reach further."""

    def __init__(self, timeout_ms: int, replicas: ReplicaWait | None = None, *, sync_flush: bool = True) -> None:
        self.timeout_ms = timeout_ms
        self.replicas = replicas
        self.sync_flush = sync_flush  # batches wait for their flush before the builders may apply them
        self.flushed_end = 0
        self.replicated: Replicated | None = None  # the HA actor's last notice
        self.replicated_ms = 0                     # and when it came
        self.for_flush: deque[PendingSync] = deque()
        self.for_replicas: deque[PendingSync] = deque()
        self.ready: list[PendingSync] = []  # nothing to wait for (SLAVE_NOT_AVAILABLE, no flush): the next release
        self.held = 0
        self.answered_as: dict[str, int] = {}  # answers whose wait failed, by status
        self.undispatched: deque[tuple[Dispatch, int]] = deque()  # a batch, and when it goes without its copies
        self.tail_end = 0  # a recovered tail below it waits for its flush before builders may apply it

    def __len__(self) -> int:
        """Answers waiting for a flush, for copies, or for both."""
        return self.held

    @property
    def flush_wanted(self) -> bool:
        """Whether something waits for a flush: the flush service is asked to flush at once."""
        return bool(self.for_flush) or self.tail_end > 0

    @property
    def holds_dispatch(self) -> bool:
        """Whether batches wait here before the builders may apply them: for their flush or their copies."""
        return self.sync_flush or self.replicas is not None

    @property
    def replicated_end(self) -> int:
        return self.replicated.end if self.replicated is not None else 0

    def slaves_in_sync(self, now_ms: int) -> int:
        """The last notice's count, unless it is older than the rule allows (or there was none)."""
        rule = self.replicas
        if self.replicated is None or rule is None or now_ms - self.replicated_ms > rule.stale_ms:
            return 0
        return self.replicated.in_sync

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

    def on_replicated(self, replicated_in: zmq.Socket[Any]) -> None:
        """Take every ``replicated`` notice waiting on the socket; the last one says how things stand.
        Its ``end`` is taken as it is, not as a maximum: an HA actor that says less is believed."""
        while True:
            try:
                _, frame = replicated_in.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                self.replicated = Replicated.decode(frame)
            except schema.SchemaError:
                log.warning("ignoring a malformed replicated notice")
                continue
            self.replicated_ms = monotonic_ms()

    def hold(self, end: int, identity: bytes, request_id: Any, reply: SendReply | SendEncodedReply, *,
             flush: bool = True) -> None:
        """A send's reply, whose records end at ``end``, waits for the flush (``flush``) and, on a
        SYNC_MASTER, for the copies; what waits for neither is answered on the next ``release``."""
        now = monotonic_ms()
        pending = PendingSync(end, identity, request_id, reply, now + self.timeout_ms)
        if flush:
            pending.waits = 1
            self.for_flush.append(pending)
        rule = self.replicas
        if rule is not None and not identity.startswith(OWN_PEER):
            if self.slaves_in_sync(now) >= rule.slaves:
                pending.replica_deadline_ms = now + rule.timeout_ms
                pending.waits += 1
                self.for_replicas.append(pending)
            else:
                pending.status = _SLAVE_NOT_AVAILABLE
        if not pending.waits:
            self.ready.append(pending)
        self.held += 1

    def hold_dispatch(self, notice: Dispatch) -> None:
        rule = self.replicas
        self.undispatched.append((notice, monotonic_ms() + rule.timeout_ms if rule is not None else 0))

    def _publish(self, outlets: Outlets, now_ms: int) -> None:
        """Publish the held batches the flush (under SYNC_FLUSH) and the copies (on a SYNC_MASTER, while
        a slave is in sync and the batch's slave timeout runs) cover, in order."""
        flushed = self.flushed_end if self.sync_flush else _UNBOUNDED
        rule = self.replicas
        copied = self.replicated_end if rule is not None and self.slaves_in_sync(now_ms) >= rule.slaves \
            else _UNBOUNDED
        held = self.undispatched
        while held:
            notice, copies_deadline_ms = held[0]
            if notice.to_phys > flushed or (notice.to_phys > copied and copies_deadline_ms > now_ms):
                return
            held.popleft()
            outlets.dispatch(notice)

    def release(self, outlets: Outlets) -> None:
        """Publish what the flush covers; answer what both waits are done with (by their notices or
        their timeouts), in the order they were written."""
        if not (self.held or self.undispatched or self.tail_end):
            return  # nothing waits (an ASYNC_FLUSH writer's every round): no clock read, no checks
        if 0 < self.tail_end <= self.flushed_end:  # before any batch: they all come after it
            outlets.progress.dispatched_end = max(outlets.progress.dispatched_end, self.tail_end)
            self.tail_end = 0
        now = monotonic_ms()
        self._publish(outlets, now)
        done = self.ready
        if not (done or self.for_flush or self.for_replicas):
            return
        self.ready = []
        flushed, waiting = self.flushed_end, self.for_flush
        while waiting and (waiting[0].end <= flushed or waiting[0].flush_deadline_ms <= now):
            p = waiting.popleft()
            if p.end > flushed and p.status == _PUT_OK:  # a replica's failure, known first, stays
                p.status = _FLUSH_DISK_TIMEOUT
            p.waits -= 1
            if not p.waits:
                done.append(p)
        replicated, waiting = self.replicated_end, self.for_replicas
        while waiting and (waiting[0].end <= replicated or waiting[0].replica_deadline_ms <= now):
            p = waiting.popleft()
            if p.end > replicated:  # overwrites a flush's failure, as RocketMQ's does
                p.status = _FLUSH_SLAVE_TIMEOUT
            p.waits -= 1
            if not p.waits:
                done.append(p)
        if self.replicas is not None and len(done) > 1:  # done by either wait, or by none: in the order written
            done.sort(key=lambda p: p.end)  # stable (a round's answers keep their order), linear when sorted
        self._answer(outlets, done)

    def _answer(self, outlets: Outlets, done: list[PendingSync]) -> None:
        latency = outlets.progress.send_latency
        for p in done:
            if p.status == _PUT_OK:
                reply = p.reply
            else:
                reply = p.reply.stored_as(p.status)
                self.answered_as[p.status] = self.answered_as.get(p.status, 0) + 1
            outlets.reply(p.identity, reply.encode(p.request_id))
            latency.observe(time.perf_counter() - p.held_s)
        self.held -= len(done)

    def drain(self, outlets: Outlets, flushed_in: zmq.Socket[Any],
              replicated_in: zmq.Socket[Any] | None = None, sync_own: Callable[[int], int] | None = None) -> None:
        """On stop, give waiting sends their flush and copies, or their timeouts: never wait longer
        than the longer timeout (the HA actor may be gone). What waits for a flush is flushed here
        by ``sync_own`` (given how far the log is flushed, it makes the log durable to its end and
        returns that end; an OSError leaves the flush to the flush service): the flush service stops
        at the same time (every actor is stopped at once when the supervisor dies) and its notice may
        never come. Batches still not dispatched are read back from the commitlog by the builders, or
        by the supervisor's final catch-up."""
        if sync_own is not None and self.sync_flush and self.flush_wanted:
            try:
                self.flushed_end = max(self.flushed_end, sync_own(self.flushed_end))
            except OSError as exc:
                log.error("cannot flush the commitlog at stop (%s): its waiting sends wait for the flush service", exc)
        longest = max(self.timeout_ms, self.replicas.timeout_ms if self.replicas is not None else 0)
        deadline = monotonic_ms() + longest
        while (self.held or self.undispatched) and monotonic_ms() < deadline:
            if flushed_in.poll(25):
                self.on_flushed(flushed_in)
            if replicated_in is not None and replicated_in.poll(25):
                self.on_replicated(replicated_in)
            self.release(outlets)
        self.release(outlets)
        self.undispatched.clear()

    def stats(self, now_ms: int) -> dict[str, Any]:
        """What the writer reports each tick of its waits: answers held for each wait, the answers
        whose wait failed, and on a SYNC_MASTER the HA actor's last word and its age."""
        stats: dict[str, Any] = {"pending_flush": len(self.for_flush), "pending_replicas": len(self.for_replicas),
                                 "answered_as": dict(self.answered_as)}
        if self.replicas is not None:
            last = self.replicated
            stats["replicated"] = None if last is None else {
                "end": last.end, "in_sync": last.in_sync, "connected": last.connected, "epoch": last.epoch,
                "age_ms": now_ms - self.replicated_ms}
        return stats
