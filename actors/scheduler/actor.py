"""scheduler's loop: delay-level messages go back to their real topics when due (RocketMQ's ScheduleMessageService).

Each round: for every level whose next entry is due (``mqstore.actors.scheduler.schedule``), the due entries
in order, up to ``BATCH`` in all, go to the writer's ingress as one ``send`` (a DEALER, as any
producer); the level's offset moves past an entry only once the writer answered PUT_OK for its copy
(``mqstore.actors.scheduler.progress``). One send is in flight at a time. A copy refused for a passing
reason (the disk full, the writer restarting) is sent again after ``RETRY_MS``, holding its level
back, as RocketMQ's synchronous delivery does; one refused as illegal (a real topic gone, a queue
out of range) can never be stored and is skipped with an error in the log.

No busy loop: the actor sleeps in one poll until the earliest due time among the levels, an
``arrived`` notice that the schedule topic grew, a reply, or the save of its progress; it looks
again at each level at least every ``RECHECK_MS`` (the broker's idle safety net), since PUB/SUB may
drop a notice, and an idle scheduler wakes for nothing else. Entries become due on the wall clock
(their tags code is a wall-clock delivery time), never before it.

A copy answered PUT_OK or FLUSH_DISK_TIMEOUT is in the log: the level moves past it in memory at
once (a retry would store it twice), and the progress that counts it reaches ``delayOffset.json``
only once a ``flushed`` notice says the commitlog is durable past it (``mqstore.actors.flushed``).

A send unanswered for ``REPLY_TIMEOUT_MS`` (the writer died with it) is given up: the socket is
closed without linger (a send queued for the dead writer is never delivered to the next one), the
commitlog is read from the re-put floor for copies already stored, and the rest is sent again.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.flushed import FlushedFollower, sync_commitlog
from mqstore.actors.runtime import Runtime
from mqstore.actors.scheduler.progress import Copy, Progress
from mqstore.actors.scheduler.schedule import Due, ScheduleQueues, reput_wire
from mqstore.actors.ticks import IDLE_TICK_MS
from mqstore.engine.delay.table import queue_level
from mqstore.engine.log.message import PutStatus
from mqstore.engine.log.record import SCHEDULE_TOPIC
from mqstore.ipc.transport.sockets import connect, waiting_replies
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Arrived
from mqstore.ipc.wire.requests import Send, SendMessage

log = logging.getLogger("mqstore")

BATCH = 512
RECHECK_MS = IDLE_TICK_MS  # a level at its queue's end looks again this often: a lost notice costs this
RETRY_MS = 100           # RocketMQ re-arms a level whose put failed after 100 ms
REPLY_TIMEOUT_MS = 10_000
NOTICE_GAP_MS = 25       # new entries are due a level's delay later: noticing them 25 ms late costs nothing
IDLE_STEP_MS = 100       # how often an idle scheduler moves its re-put floor up to the dispatched end
_SCHEDULE_NAME = SCHEDULE_TOPIC.encode()
_PERMANENT = (PutStatus.MESSAGE_ILLEGAL.value, PutStatus.PROPERTIES_SIZE_EXCEEDED.value)
# a flush timeout's record is in the log: counted stored (never sent again), saved once flushed
_STORED = (PutStatus.PUT_OK.value, PutStatus.FLUSH_DISK_TIMEOUT.value)


@dataclass(frozen=True, slots=True)
class _InFlight:
    request_id: int
    entries: list[tuple[Due, tuple[str, int]]]
    sent_ms: int


class SchedulerActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        cfg = runtime.config
        self.store_dir = Path(cfg.store_dir)
        self.levels = cfg.store.delay_levels
        self.geometry = cfg.store.geometry
        self.schedule = ScheduleQueues(self.store_dir, cfg.store.geometry, self.levels, runtime.open_files)
        self.progress = Progress.load(self.store_dir, self.levels.max_level, self.schedule.commitlog)
        for level in self.levels.levels:
            self.progress.clamp(level, *self.schedule.bounds(level))
        found = self.progress.recover(self.schedule.commitlog)
        log.info("delay offsets %s; %d copies found stored past them", self.progress.offsets, found)
        self.next_look_ms = dict.fromkeys(self.levels.levels, 0)  # wall ms; 0: look now
        self.at_end: set[int] = set()  # levels whose queue ended at their last look: an arrived notice wakes them
        self.in_flight: _InFlight | None = None
        self.ids = itertools.count(1)
        self.delivered = 0
        self.ingress: zmq.Socket[Any] | None = None
        self.idle_step_at_ms = 0

    def run(self) -> None:
        self.rt.report("running", force=True, delivered=0)
        arrived_in = connect(self.rt.ctx, zmq.SUB, self.rt.endpoints.arrived, subscribe=(schema.ARRIVED,))
        self.poller = zmq.Poller()
        self.poller.register(self.rt.stop_fd, zmq.POLLIN)  # a stop ends the round at once, not in up to a second
        self._connect_ingress()
        flushed = FlushedFollower(self.rt.ctx, self.rt.endpoints.flushed)
        quiet_until = 0  # monotonic ms: notices wait in their socket until then
        try:
            while not self.rt.stopping:
                if self.in_flight is None:
                    self._send_due(wall_ms())
                # saved while the writer stores the send (its fsyncs overlap the round trip, not the next round)
                self.progress.on_flushed(flushed.drain())
                self.progress.save(wall_ms(), monotonic_ms())
                # a state waiting for the flush: the next flushed notice wakes the loop to write it
                if self.progress.gate and flushed.socket not in self.poller:
                    self.poller.register(flushed.socket, zmq.POLLIN)
                elif not self.progress.gate and flushed.socket in self.poller:
                    self.poller.unregister(flushed.socket)
                gap_ms = quiet_until - monotonic_ms()
                if gap_ms <= 0 and arrived_in not in self.poller:
                    self.poller.register(arrived_in, zmq.POLLIN)
                timeout_ms = self._timeout_ms() if gap_ms <= 0 else min(self._timeout_ms(), gap_ms)
                events = self.rt.poll(self.poller, timeout_ms)
                if arrived_in in events:
                    self._on_arrived(arrived_in)
                    # a stream of notices (one a consume-queue round) wakes the loop once a gap, not each time
                    quiet_until = monotonic_ms() + NOTICE_GAP_MS
                    self.poller.unregister(arrived_in)
                if self.ingress in events:
                    self._on_replies()
                if self.in_flight is not None and monotonic_ms() - self.in_flight.sent_ms >= REPLY_TIMEOUT_MS:
                    self._give_up()
                self.rt.report("running", delivered=self.delivered,
                               offsets=[self.progress.offsets[level] for level in sorted(self.progress.offsets)])
        finally:
            # the flush service stops after this actor: the copies it has not flushed are synced here,
            # so the offsets saved count every copy stored
            self.progress.on_flushed(flushed.drain())
            self.progress.on_flushed(sync_commitlog(self.store_dir / "commitlog", self.geometry.commitlog_file_size,
                                                    self.progress.gate.flushed_end, self.progress.stored_end))
            self.progress.save(wall_ms(), monotonic_ms(), force=True)
            flushed.close()
            self.rt.report("stopped", force=True, delivered=self.delivered)
            self.schedule.close()

    def _connect_ingress(self) -> None:
        if self.ingress is not None:
            self.poller.unregister(self.ingress)
            self.ingress.close(linger=0)
        self.ingress = connect(self.rt.ctx, zmq.DEALER, self.rt.endpoints.own_ingress)
        self.poller.register(self.ingress, zmq.POLLIN)

    def _timeout_ms(self) -> int:
        if self.in_flight is not None:
            return max(1, REPLY_TIMEOUT_MS - (monotonic_ms() - self.in_flight.sent_ms))
        timeout_ms = min(min(self.next_look_ms.values()) - wall_ms(), RECHECK_MS)
        if self.progress.dirty:  # a state to save once its interval has passed
            timeout_ms = min(timeout_ms, self.progress.next_save_ms - monotonic_ms())
        return max(0, timeout_ms)

    def _send_due(self, now: int) -> None:
        """The due entries of every level that may go, up to BATCH, in one send."""
        entries: list[tuple[Due, tuple[str, int]]] = []
        msgs: list[SendMessage] = []
        for level, look_ms in self.next_look_ms.items():
            if look_ms > now or len(msgs) >= BATCH:
                continue
            scan = self.schedule.scan(level, self.progress.offsets[level], now, BATCH - len(msgs))
            self.next_look_ms[level] = now + RECHECK_MS if scan.next_due_ms is None else scan.next_due_ms
            if scan.next_due_ms is None:
                self.at_end.add(level)
            else:
                self.at_end.discard(level)
            for queue_offset in scan.gone:
                log.warning("delay level %d: entry %d's record is gone with retention; skipped", level, queue_offset)
                self.progress.delivered(level, queue_offset, None)
            for due in scan.due:
                if due.queue_offset < self.progress.offsets[level]:
                    continue  # passed while this scan's entries were looked at (copies found stored)
                wire, real = reput_wire(due), due.real
                if wire is None or real is None:
                    log.error("delay level %d: entry %d has no REAL_TOPIC / REAL_QID; skipped", level,
                              due.queue_offset)
                    self.progress.delivered(level, due.queue_offset, None)
                elif self.progress.already_stored(level, due.queue_offset, real) or self.progress.given_up(
                        level, due.queue_offset):
                    self.progress.delivered(level, due.queue_offset, self.progress.ahead[level][due.queue_offset])
                else:
                    entries.append((due, real))
                    msgs.append(wire)
        if not msgs or self.ingress is None:
            return
        request_id = next(self.ids)
        try:
            self.ingress.send(schema.pack(Send(tuple(msgs)).encode(request_id)), zmq.NOBLOCK)
        except zmq.Again:
            for due, _ in entries:
                self.next_look_ms[due.level] = now + RETRY_MS
            return
        self.in_flight = _InFlight(request_id, entries, monotonic_ms())

    def _on_arrived(self, sock: zmq.Socket[Any]) -> None:
        """New schedule entries: a level that had reached its queue's end looks again now. Every queue
        that grows sends a notice, so only one that names the schedule topic (a bytes search; msgpack
        keeps strings as they are) is decoded for its levels; the floor follows the newest notice read,
        at most once every ``IDLE_STEP_MS`` (a floor left behind only makes a restart read further)."""
        now = wall_ms()
        newest = None
        while True:
            try:
                _, frame = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            except ValueError:
                continue
            newest = frame
            if _SCHEDULE_NAME not in frame:
                continue
            notice = _arrived(frame)
            for topic, queue_id, _ in notice.queues if notice is not None else ():
                # a level waiting on its head's due time keeps it: entries behind the head are due later
                if topic == SCHEDULE_TOPIC and queue_level(queue_id) in self.at_end:
                    self.next_look_ms[queue_level(queue_id)] = now
        if newest is not None and self.in_flight is None and now >= self.idle_step_at_ms:
            notice = _arrived(newest)
            if notice is not None:
                self.idle_step_at_ms = now + IDLE_STEP_MS
                self.progress.idle_at(notice.applied)

    def _on_replies(self) -> None:
        assert self.ingress is not None
        for reply in waiting_replies(self.ingress, "scheduler"):
            if self.in_flight is None or reply.get("id") != self.in_flight.request_id:
                continue  # a reply to a send given up on: its copies were found in the commitlog
            self._apply(reply, self.in_flight)
            self.in_flight = None

    def _apply(self, reply: dict[str, Any], sent: _InFlight) -> None:
        now = wall_ms()
        results = reply.get("results") if reply.get("ok") is True else None
        if not isinstance(results, list) or len(results) != len(sent.entries):
            log.warning("the writer refused a re-put send: %s", reply.get("reason") or reply.get("code"))
            results = [{}] * len(sent.entries)
        for (due, real), result in zip(sent.entries, results, strict=True):
            status = result.get("status") if isinstance(result, dict) else None
            if status in _STORED:
                phys = result.get("phys_offset")
                copy = Copy(*real, phys if isinstance(phys, int) else self.progress.last_copy_phys)
                self.progress.delivered(due.level, due.queue_offset, copy)
                self.delivered += 1
            elif status in _PERMANENT:
                log.error("delay level %d: entry %d can never be stored on %s/%d (%s): skipped", due.level,
                          due.queue_offset, *real, result.get("reason"))
                self.progress.delivered(due.level, due.queue_offset, None)
            else:
                self.next_look_ms[due.level] = max(self.next_look_ms[due.level], now + RETRY_MS)

    def _give_up(self) -> None:
        """The writer never answered: a new socket, and the copies it stored read off the commitlog."""
        log.warning("the writer did not answer a re-put send in %d ms; reading back what it stored",
                    REPLY_TIMEOUT_MS)
        self.in_flight = None
        self._connect_ingress()
        self.progress.recover(self.schedule.commitlog)
        self.next_look_ms = dict.fromkeys(self.next_look_ms, 0)


def _arrived(frame: bytes) -> Arrived | None:
    try:
        return Arrived.decode(frame)
    except schema.SchemaError as exc:
        log.warning("ignoring a malformed arrived notice: %s", exc)
        return None
