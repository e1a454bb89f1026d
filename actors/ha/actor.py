"""The HA actor: replication's own process, a master's or a slave's side by the broker's role.

One loop (``zmq.Poller`` over the ZeroMQ sockets and the raw TCP sockets together, no thread per
connection) runs either side:

- master (``mqstore.actors.ha.master``): learns the writer's end from ``written`` notices, serves its
  slaves from the mapped commitlog, and publishes ``Replicated`` on ``endpoints.replicated`` on every
  change, to a subscriber as it joins, and every heartbeat interval while a slave is connected (the
  writer counts no slave in sync once the last notice is older than three: ``mqstore.actors.writer.sync``).
  With no epoch file yet it starts epoch 1 at the log's first offset, written before the port opens.
- slave (``mqstore.actors.ha.slave``): the only writer of the commitlog. It finds its log's end as
  the writer does (the records checked from what the consume queues cover, a torn tail cut), follows
  its master, publishes ``tick`` (up to the last complete record) and ``written`` for the builders and
  the flush service, and answers the writer's ingress (``mqstore.actors.ha.slave_ingress``).

Either side sleeps until something comes (a frame, a connection, a notice, a subscription) or a
deadline that exists falls due: a heartbeat or report to send (``[ha] heartbeat_interval_ms``), a
silent peer to close, a retry, a tick repeating a move; with none, the reports' safety net.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.ha.log_end import recover_end
from mqstore.actors.ha.log_source import LogSource
from mqstore.actors.ha.master import MasterSide
from mqstore.actors.ha.slave import SlaveSide
from mqstore.actors.ha.slave_ingress import SlaveIngress
from mqstore.actors.ha_status import CONNECTING
from mqstore.actors.runtime import IDLE_REPORT_MS, Runtime
from mqstore.actors.ticks import Ticks
from mqstore.engine.ha.epochs import EpochFile
from mqstore.engine.ha.replica import complete_end
from mqstore.engine.log.commitlog import CommitLog
from mqstore.ipc.transport.sockets import bind, connect, recv_message
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Replicated, Tick, Written

log = logging.getLogger("mqstore")


class HaActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.store_dir = Path(runtime.config.store_dir)

    def run(self) -> None:
        if self.rt.config.is_slave:
            self._run_slave()
        else:
            self._run_master()

    # -- master ------------------------------------------------------------------------------------

    def _run_master(self) -> None:
        cfg = self.rt.config
        commitlog = CommitLog.open(self.store_dir / "commitlog", cfg.store.geometry.commitlog_file_size,
                                   writable=False, open_files=self.rt.open_files)
        epochs = EpochFile.load(self.store_dir)
        if not epochs.entries:
            epochs.append(1, commitlog.min_offset)  # before the port opens: every slave sees the same epoch
        side = MasterSide(cfg.ha, LogSource(commitlog), epochs.entries, monotonic_ms())
        ep = self.rt.endpoints
        written_in = connect(self.rt.ctx, zmq.SUB, ep.written, subscribe=(schema.WRITTEN,))
        # XPUB: a subscription coming in (the writer started, or restarted) wakes the loop, and the
        # subscriber hears the last word at once rather than at the next change or heartbeat
        replicated_out = bind(self.rt.ctx, zmq.XPUB, ep.replicated)
        replicated_out.setsockopt(zmq.XPUB_VERBOSE, 1)
        listener = side.listen(cfg.ha_address)
        heartbeat_ms = cfg.ha.heartbeat_interval_ms
        next_publish = 0
        published: Replicated | None = None
        try:
            while not self.rt.stopping:
                poller = zmq.Poller()
                poller.register(written_in, zmq.POLLIN)
                poller.register(replicated_out, zmq.POLLIN)
                poller.register(self.rt.stop_fd, zmq.POLLIN)
                poller.register(listener.fileno(), zmq.POLLIN)
                for fd, link in side.links.items():
                    poller.register(fd, zmq.POLLIN | (zmq.POLLOUT if link.peer.wants_write else 0))
                heard = published is not None and published.connected > 0  # the writer hears it every heartbeat
                due = _due_ms(monotonic_ms(), side.due_ms(), next_publish if heard else None)
                ready = self.rt.poll(poller, max(due - monotonic_ms(), 0))
                now = monotonic_ms()
                if not ready and now < due:
                    # woken only to send a report held back by the stats interval (the poll sent it): no
                    # report now, whose figures of time would differ, be held back and wake it again
                    continue
                joined = replicated_out in ready and _drain_subscriptions(replicated_out)
                if written_in in ready:
                    side.note_written(_drain_written(written_in), now)
                if listener.fileno() in ready:
                    side.accept(now)
                for fd, link in list(side.links.items()):
                    if ready.get(fd, 0) & zmq.POLLIN:
                        side.on_readable(link, now)
                for link in list(side.links.values()):
                    side.push(link, now)
                side.housekeep(now)
                notice = side.replicas.replicated(max(side.written_end, 0), side.epoch)
                if notice != published or joined or (notice.connected > 0 and now >= next_publish):
                    replicated_out.send_multipart(notice.frames())
                    published, next_publish = notice, now + heartbeat_ms
                self.rt.report("running", role=cfg.broker.role, epoch=side.epoch, ha_state="serving",
                               listen="{}:{}".format(*cfg.ha_address), written=side.written_end,
                               replicated=notice.end, in_sync=notice.in_sync, connected=notice.connected,
                               slaves=side.replicas.stats(max(side.written_end, 0), now),
                               sent_bytes=side.sent_bytes, refused=side.refused, closed=side.closed)
        finally:
            side.close()
            commitlog.close()

    # -- slave -------------------------------------------------------------------------------------

    def _run_slave(self) -> None:
        cfg = self.rt.config
        commitlog = CommitLog.open(self.store_dir / "commitlog", cfg.store.geometry.commitlog_file_size,
                                   open_files=self.rt.open_files)
        start, end = recover_end(self.store_dir, commitlog, cfg.store.geometry.cq_entries_per_file)
        side = SlaveSide(cfg.ha, cfg.broker.broker_id, commitlog, EpochFile.load(self.store_dir), end)
        ingress_answers = SlaveIngress(self.store_dir, cfg.ha.master_address, lambda: side.end,
                                       cfg.broker.max_request_bytes)
        ep = self.rt.endpoints
        ingress = bind(self.rt.ctx, zmq.ROUTER, ep.ingress, max_msg_bytes=cfg.broker.max_request_bytes)
        own_ingress = bind(self.rt.ctx, zmq.ROUTER, ep.own_ingress, max_msg_bytes=cfg.broker.max_request_bytes)
        dispatch_out = bind(self.rt.ctx, zmq.PUB, ep.dispatch, hwm=100_000)
        written_out = bind(self.rt.ctx, zmq.PUB, ep.written)
        complete = start
        tick_ms = cfg.broker.tick_interval_ms
        ticks = Ticks()  # written and tick: on a move (twice, a tick apart), else every IDLE_TICK_MS
        next_tick = 0
        try:
            while not self.rt.stopping:
                now = monotonic_ms()
                side.connect(now)
                poller = zmq.Poller()
                for sock in (ingress, own_ingress):
                    poller.register(sock, zmq.POLLIN)
                poller.register(self.rt.stop_fd, zmq.POLLIN)
                peer = side.peer
                if peer is not None:
                    connecting = side.state == CONNECTING
                    poller.register(peer.fd, zmq.POLLIN | (zmq.POLLOUT if connecting or peer.wants_write else 0))
                tick_due = ticks.next_idle_ms if ticks.quiet((side.end, complete)) else next_tick
                due = _due_ms(now, side.due_ms(), tick_due)
                ready = self.rt.poll(poller, max(due - now, 0))
                now = monotonic_ms()
                if not ready and now < due:
                    # woken only to send a report held back by the stats interval (the poll sent it): no
                    # report now, whose figures of time would differ, be held back and wake it again
                    continue
                for sock in (ingress, own_ingress):
                    if sock in ready:
                        _answer(sock, ingress_answers)
                grew = False
                if peer is not None and peer is side.peer and peer.fd in ready:
                    if side.state == CONNECTING:
                        side.on_connected(now)
                    elif ready[peer.fd] & zmq.POLLOUT:
                        peer.flush()
                    if side.peer is not None and ready[peer.fd] & zmq.POLLIN:
                        grew = side.on_readable(now)
                if grew:
                    side.report(now, force=True)
                    complete = complete_end(commitlog, complete, side.end)
                if (grew or now >= next_tick) and ticks.due((side.end, complete), False, now):
                    next_tick = now + tick_ms
                    written_out.send_multipart(Written(side.end, 0, cfg.sync_flush).frames())
                    dispatch_out.send_multipart(Tick(complete).frames())
                side.report(now)
                side.housekeep(now)
                self.rt.report("running", role=cfg.broker.role, epoch=side.epochs.last_epoch, ha_state=side.state,
                               master=side.master, reason=side.reason, written=side.end, complete=complete,
                               confirm=side.confirm, master_end=side.master_end,
                               since_master_ms=side.since_master_ms(now),
                               appended_bytes=side.appended_bytes, connects=side.connects,
                               refused_sends=ingress_answers.refused)
        finally:
            side.close()
            commitlog.close()


def _due_ms(now_ms: int, *deadlines_ms: int | None) -> int:
    """When the loop wakes if nothing comes: the nearest deadline that exists, the reports' safety net
    at the latest."""
    return min([d for d in deadlines_ms if d is not None] + [now_ms + IDLE_REPORT_MS])


def _drain_subscriptions(sock: zmq.Socket[Any]) -> bool:
    """Take the subscriptions that came to an XPUB; whether one was a subscribe (not a leave)."""
    joined = False
    while True:
        try:
            frame = sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return joined
        joined = joined or frame[:1] == b"\x01"


def _drain_written(sock: zmq.Socket[Any]) -> int:
    end = -1
    while True:
        try:
            _, frame = sock.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return end
        try:
            end = max(end, Written.decode(frame).end)
        except schema.SchemaError as exc:
            log.warning("ignoring a malformed written notice: %s", exc)


def _answer(sock: zmq.Socket[Any], answers: SlaveIngress) -> None:
    while True:
        try:
            frames, parts = recv_message(sock, zmq.NOBLOCK, head=2)
        except zmq.Again:
            return
        if len(frames) != 2:
            continue
        reply = answers.answer(frames[1], parts)
        try:
            sock.send_multipart([frames[0], schema.pack(reply)], zmq.NOBLOCK)
        except zmq.Again:
            log.warning("a client does not read its replies; reply dropped")
