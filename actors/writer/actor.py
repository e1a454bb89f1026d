"""commitlog-writer's loop: the only writer of ``commitlog/``.

Producers' DEALERs send requests to the ROUTER ``ingress``; the broker's own actors (scheduler, timer,
transactions) to ``own_ingress``, in the private run directory, the one door to the system topics a
client may not name (``mqstore.engine.put.system_topics``). Every poll round drains what waits there
(``mqstore.actors.writer.ingress`` parses each request) and appends the sends as one batch per kind, one
copy per file (``mqstore.actors.writer.sends`` for maps of messages, ``mqstore.actors.writer.encoded`` for
producer-encoded records), then:

- ASYNC_FLUSH: answers each producer at once (the bytes are in the page cache) and publishes the
  batch's DispatchRequests on ``dispatch``;
- SYNC_FLUSH: publishes ``written`` with ``sync`` set, and answers (and dispatches) only once the
  flush service's ``flushed`` notice covers the batch (``mqstore.actors.writer.sync``); a notice that does
  not come within the sync timeout answers FLUSH_DISK_TIMEOUT (the record is in the log and becomes
  visible once flushed);
- SYNC_MASTER (``[broker] role``): answers once the HA actor's ``replicated`` notice says ``[ha]
  in_sync_replicas`` copies hold the batch, beside the flush's wait under SYNC_FLUSH, else
  FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (``mqstore.actors.writer.sync``); the batch is
  dispatched once the copies hold it too (or no slave is in sync, or its slave timeout passed).

Every tick it publishes ``tick`` (how far builders may apply) and ``written`` (how far the log goes),
so a dropped notice only delays, and persists new topics. On its own cadence it checks the disk:
past the warning ratio sends are refused until usage drops, and retention deletes expired commitlog
files, and with ``reclaim_consumed`` the files every group consumed (``mqstore.actors.writer.reclaimer``);
with ``move_stragglers_below`` it then moves the few unacked messages that alone hold the oldest
file (``mqstore.actors.writer.mover``).
On start it finds the log's end itself: from what the consume queues cover, records are checked
with their CRCs, the torn tail of a killed predecessor is cut, and queue offsets continue from the
records found. Under SYNC_FLUSH the records found past what the queues cover are that predecessor's,
maybe never flushed: the builders may apply them only once the flush service says they are durable
(``SyncWaiters.hold_tail``). Under ASYNC_FLUSH they are published at once, as any send is.

The loop owns the state the rounds share (``mqstore.actors.writer.state``) and hands it to them with the
sockets they answer and publish on (``mqstore.actors.writer.outlets``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.flushed import sync_commitlog
from mqstore.actors.runtime import Runtime
from mqstore.actors.writer import encoded, sends
from mqstore.actors.writer.ingress import Answer, Ingress
from mqstore.actors.writer.mover import StragglerMover
from mqstore.actors.writer.outlets import Outlets, Progress
from mqstore.actors.writer.prefault import PrefaultThread, ahead_bytes_for
from mqstore.actors.writer.reclaimer import Reclaimer
from mqstore.actors.writer.state import DiskState, TopicQueues, WriterState
from mqstore.actors.writer.sync import ReplicaWait, SyncWaiters
from mqstore.engine.ackindex.low_water import unacked_low_water
from mqstore.engine.batch.dispatch import DispatchRequest
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import MappedFile
from mqstore.engine.log.msgid import UniqKeyGenerator
from mqstore.engine.log.record import SCHEDULE_TOPIC, DecodeKind
from mqstore.engine.meta.topics import TopicTable
from mqstore.engine.put.writer import CommitLogWriter
from mqstore.engine.reclaim.move import MOVED_TOPIC
from mqstore.engine.reclaim.retention import decide, delete_expired_commitlog, disk_used_ratio, ends_by
from mqstore.engine.timer.put_rule import TIMER_QUEUE_COUNT, TIMER_TOPIC
from mqstore.ipc.transport.closed import ClosedConnections
from mqstore.ipc.transport.sockets import bind, connect, has_message, recv_first, recv_message
from mqstore.ipc.wire import schema

log = logging.getLogger("mqstore")


class CommitLogWriterActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        cfg = runtime.config
        self.store_dir = Path(cfg.store_dir)
        self.commitlog = CommitLog.open(self.store_dir / "commitlog", cfg.store.geometry.commitlog_file_size,
                                        open_files=runtime.open_files)
        # a roll renames the flush service's spare (mqstore.engine.log.page_warmer); adopted whatever [flush] spare_file
        # says, so a spare left by an earlier run with it on is used once rather than kept as dead disk
        self.commitlog.queue.adopt_spares = True
        offsets, applied_end = self._recover_tail()
        uniq = UniqKeyGenerator.for_this_process(wall_ms, cfg.store.store_host.packed[:-4])
        self.prefault = PrefaultThread(ahead_bytes_for(cfg.store.prefault_ahead_bytes, cfg.sync_flush))
        runtime.open_files.guard = self.prefault.paused  # no file is unmapped under the prefault thread
        # deferred: a burst of new topics costs one topics.json write per tick, not one each (a topic
        # lost with a crash comes back on its next send; its queues and their files are on disk)
        topics = TopicTable.load(self.store_dir, wall_ms, max_topics=cfg.broker.max_topics, deferred=True,
                                 auto_create=cfg.broker.auto_create_topics)
        # the delay levels' topic, one queue per level, made by the broker as RocketMQ's TopicConfigManager does
        topics.create(SCHEDULE_TOPIC, cfg.store.delay_levels.max_level)  # one queue per level
        if cfg.store.timer_wheel_enable:
            topics.create(TIMER_TOPIC, TIMER_QUEUE_COUNT)  # RocketMQ's system topic, made by the broker
        if cfg.retention.move_stragglers_below:
            topics.create(MOVED_TOPIC, 1)  # where moved stragglers' copies go (mqstore.engine.reclaim.move)
        self.state = WriterState(cfg, CommitLogWriter(self.commitlog, cfg.store, offsets, uniq),
                                 TopicQueues(topics, cfg.broker.default_queues), DiskState(),
                                 SyncWaiters(cfg.flush.sync_timeout_ms, ReplicaWait.of(cfg),
                                             sync_flush=cfg.sync_flush))
        self.ingress = Ingress(cfg, self.state.queues, self.commitlog, self.state.writer.next_queue_offsets,
                               cfg.key_roles())
        self.progress = Progress(self.commitlog.max_offset)
        if cfg.sync_flush and self.commitlog.max_offset > applied_end:
            self.progress.dispatched_end = applied_end
            self.state.waiters.hold_tail(self.commitlog.max_offset)
        self.next_disk_check_ms = 0
        self.closed: ClosedConnections | None = None  # the ingress's monitor, once it is bound
        self.next_clean_ms = monotonic_ms() + cfg.broker.clean_interval_ms
        self.reclaimer = Reclaimer(cfg, runtime.open_files)
        self.mover = StragglerMover(self.state) if cfg.retention.move_stragglers_below else None

    def _recover_tail(self) -> tuple[dict[tuple[str, int], int], int]:
        """The log's true end and every queue's next offset, whatever a killed writer left; and
        where the scan started, how far the consume queues cover."""
        geometry = self.rt.config.store.geometry
        queues = ConsumeQueueStore.open(self.store_dir / "consumequeue", geometry.cq_entries_per_file,
                                        writable=False)
        try:
            offsets, covered = queues.published_state()
        finally:
            queues.close()
        end = applied_end = max(covered, self.commitlog.min_offset)
        for phys, decoded in self.commitlog.scan(end, require_prop_crc=geometry.prop_crc, read_body=False):
            if decoded.kind is DecodeKind.RECORD and decoded.record is not None:
                end = phys + decoded.size
                record = DispatchRequest.from_record(decoded.record, self.rt.config.store.delay_levels)
                if record.has_queue_entry:
                    key = (record.topic, record.queue_id)
                    offsets[key] = max(offsets.get(key, 0), record.queue_offset + 1)
            elif decoded.kind is DecodeKind.BLANK:
                end = self.commitlog.queue.roll_next(phys)
        if self.commitlog.queue.files:
            self.commitlog.queue.truncate_after(end)
        log.info("commitlog ends at %d; %d queues", end, len(offsets))
        return offsets, applied_end

    # -- the loop ----------------------------------------------------------------------------------

    def run(self) -> None:
        ep = self.rt.endpoints
        ctx = self.rt.ctx
        max_bytes = self.rt.config.broker.max_request_bytes
        # inbound bounded (a flood waits in the sender); replies not: a pipelining producer must get every one
        ingress = bind(ctx, zmq.ROUTER, ep.ingress, max_msg_bytes=max_bytes, rcvhwm=self.rt.config.broker.ingress_hwm)
        own_ingress = bind(ctx, zmq.ROUTER, ep.own_ingress, max_msg_bytes=max_bytes)  # the broker's own actors
        self.closed = closed = ClosedConnections(ingress, "ingress", max_bytes)  # what ZeroMQ drops there, logged
        dispatch_out = bind(ctx, zmq.PUB, ep.dispatch, hwm=100_000)
        written_out = bind(ctx, zmq.PUB, ep.written)
        flushed_in = connect(ctx, zmq.SUB, ep.flushed, subscribe=(schema.FLUSHED,))
        outlets = Outlets(ingress, dispatch_out, written_out, self.progress, own_ingress)
        waiters = self.state.waiters
        poller = zmq.Poller()
        poller.register(ingress, zmq.POLLIN)
        poller.register(own_ingress, zmq.POLLIN)
        poller.register(closed.monitor, zmq.POLLIN)
        poller.register(flushed_in, zmq.POLLIN)
        replicated_in = None  # a SYNC_MASTER's answers wait for the HA actor's word
        if waiters.replicas is not None:
            replicated_in = connect(ctx, zmq.SUB, ep.replicated, subscribe=(schema.REPLICATED,))
            poller.register(replicated_in, zmq.POLLIN)
        poller.register(self.rt.stop_fd, zmq.POLLIN)  # a stop ends the round at once
        tick_ms = self.rt.config.broker.tick_interval_ms
        next_tick = 0
        self.prefault.start()
        try:
            while not self.rt.stopping:
                ready = self.rt.poll(poller, self._poll_ms(tick_ms, next_tick))
                if flushed_in in ready:
                    waiters.on_flushed(flushed_in)
                if replicated_in is not None and replicated_in in ready:
                    waiters.on_replicated(replicated_in)
                if closed.monitor in ready:
                    closed.read()
                for source in (own_ingress, ingress):
                    if source in ready:
                        self.serve_round(ingress, dispatch_out, written_out, own_ingress, own=source is own_ingress)
                        self.prefault.hand(self.commitlog.queue.last_file)
                waiters.release(outlets)
                now = monotonic_ms()
                if now >= next_tick:
                    next_tick = now + tick_ms
                    self._tick(outlets, now)
                if now >= self._disk_due_ms():
                    self._check_disk(now, outlets)
            waiters.drain(outlets, flushed_in, replicated_in, self._sync_to_end)
            self._tick(outlets, monotonic_ms(), last=True)
        finally:
            self.rt.report("stopped", force=True, written=self.commitlog.max_offset)
            self.prefault.stop()
            self.reclaimer.close()
            self.commitlog.close()

    def _sync_to_end(self, flushed_end: int) -> int:
        """The commitlog made durable from ``flushed_end`` to the written end, by this process (at stop)."""
        return sync_commitlog(self.store_dir / "commitlog", self.commitlog.file_size, flushed_end,
                              self.commitlog.max_offset)

    def _poll_ms(self, tick_ms: int, next_tick: int) -> int:
        """How long the loop may sleep: a tick away while a tick has something to publish or a send
        waits (its timeout is checked on the loop's rounds), else until the next deadline that exists."""
        progress = self.progress
        if not progress.ticks.quiet(progress.carried(self.commitlog.max_offset)) or len(self.state.waiters):
            return max(min(next_tick - monotonic_ms(), tick_ms), 0)
        return max(min(progress.ticks.next_idle_ms, self._disk_due_ms()) - monotonic_ms(), 0)

    def _disk_due_ms(self) -> int:
        return self.state.disk.due_ms(self.next_disk_check_ms, self.next_clean_ms, self.commitlog.max_offset)

    def _tick(self, outlets: Outlets, now: int, *, last: bool = False) -> None:
        end = self.commitlog.max_offset
        waiters = self.state.waiters
        outlets.tick(end, waiters.flush_wanted, now, force=last)
        self.state.queues.persist()
        self.rt.report("running", written=end, flushed=waiters.flushed_end, dispatched=self.progress.dispatched_end,
                       pending_sync=len(waiters), waits=waiters.stats(monotonic_ms()),
                       spares_adopted=self.commitlog.queue.spares_adopted,
                       prefaulted=self.prefault.prefault.populated_bytes, topics_in=self.progress.topics_in.stats(),
                       send_latency=self.progress.send_latency.stats(), files=self.reclaimer.report,
                       reclaim_rounds=self.reclaimer.rounds, connections=self.closed.stats() if self.closed else None,
                       moved=self.mover.stats() if self.mover is not None else None)

    def _check_disk(self, now: int, outlets: Outlets) -> None:
        """Watermarks: past the warning ratio sends are refused until usage drops; cleanup runs on
        its cadence, or at once when the disk is past the forcible ratio."""
        cfg = self.rt.config
        self.next_disk_check_ms = now + cfg.broker.disk_check_interval_ms
        disk = self.state.disk
        was_full = disk.full
        disk.checked_end = self.commitlog.max_offset
        disk.decision = decision = decide(cfg.retention, disk_used_ratio(self.store_dir / "commitlog"), wall_ms())
        if decision.disk_full != was_full:
            log.warning("disk %.0f%% used: sends %s", decision.used_ratio * 100,
                        "refused" if decision.disk_full else "accepted again")
        if now >= self.next_clean_ms or decision.clean_immediately:
            self.next_clean_ms = now + cfg.broker.clean_interval_ms
            with self.prefault.paused():  # no file is unmapped under the prefault thread
                deleted = delete_expired_commitlog(self.commitlog, cfg.retention, decision, wall_ms(),
                                                   self._unacked_veto())
                reclaimed = self.reclaimer.round(self.commitlog)
            if self.mover is not None:
                self.mover.round(self.reclaimer.held, outlets)
            if deleted or reclaimed:
                log.info("deleted %d commitlog file(s) (%s), %d every group consumed; the log now starts at %d",
                         deleted, decision.reason or "none expired", reclaimed, self.commitlog.min_offset)

    def _unacked_veto(self) -> Callable[[MappedFile], bool] | None:
        """With ``keep_unacked``: a file may go only when it ends before every ack-mode group's oldest
        unacked message (the readers' low-water marks; RabbitMQ's reference counting, per file)."""
        if not self.rt.config.retention.keep_unacked:
            return None
        low = unacked_low_water(self.store_dir, self.rt.config.broker.readers)
        if low is None:
            return None
        return ends_by(low)

    def serve_round(self, ingress: zmq.Socket[Any], dispatch_out: zmq.Socket[Any], written_out: zmq.Socket[Any],
                    own_ingress: zmq.Socket[Any] | None = None, *, own: bool = False) -> None:
        """One round: drain the ingress queue (``own``: the broker's own actors' one) into one append,
        at most max_batch_messages and about one max_request_bytes of frames (a flood of big frames is
        taken a request's worth at a time). Other requests are answered as they come; the sends are
        appended after the drain, the producer-encoded ones last."""
        started = time.perf_counter()
        held = len(self.state.waiters)
        broker = self.rt.config.broker
        outlets = Outlets(ingress, dispatch_out, written_out, self.progress, own_ingress)
        source = own_ingress if own and own_ingress is not None else ingress
        roles = None if own else self.ingress.roles
        by_key = roles is not None and roles.poll()  # whose key sent each request matters
        message_sends: list[sends.MessageSend] = []
        encoded_sends: list[encoded.EncodedSend] = []
        count = size = 0
        waiting = True  # the poll said so: only a spurious wake-up finds nothing (zmq.Again)
        while waiting and count < broker.max_batch_messages and size < broker.max_request_bytes:
            try:  # parts (a send_encoded's records) stay in ZeroMQ's buffers until appended
                first, user_id = recv_first(source, zmq.NOBLOCK) if by_key else (None, None)
                frames, parts = recv_message(source, zmq.NOBLOCK, head=2, first=first)
            except zmq.Again:
                break
            waiting = has_message(source)  # asked, not received until zmq.Again: the exception costs more
            size += sum(map(len, frames)) + sum(map(len, parts))
            request = self.ingress.parse(frames, parts, own=source is own_ingress, user_id=user_id)
            if isinstance(request, Answer):
                outlets.reply(request.identity, request.reply)
                if request.notice is not None:  # a topic deleted: after every dispatch batch before it
                    dispatch_out.send_multipart(request.notice.frames())
            elif isinstance(request, encoded.EncodedSend):
                encoded_sends.append(request)
            else:
                message_sends.append(request)
                count += len(request.messages)
        self.state.queues.persist()  # the topics this round's sends made, before any of them is answered
        if message_sends:
            sends.write_round(self.state, outlets, message_sends)
        if encoded_sends:
            encoded.write_round(self.state, outlets, encoded_sends)
        # the sends answered in the round; those held for a flush count from their append to their answer
        answered = len(message_sends) + len(encoded_sends) - (len(self.state.waiters) - held)
        if answered > 0:
            self.progress.send_latency.observe(time.perf_counter() - started, answered)
