"""reader: pull by queue offset with a tag filter, long polling, queries, and consumer offsets.

N readers may run (``reader-0`` .. ``reader-{N-1}``), each a ROUTER at ``endpoints.reader(i)``, each
mapping the store read-only (``mqstore.actors.reader.state``): they never write a commitlog, consume-queue or
index file, and never read past what the consume-queue builder has published.

Requests (msgpack maps, ``mqstore.ipc.wire.schema``, each decoded once into its class of
``mqstore.ipc.wire.requests``; every reply echoes ``id``)::

    pull            group, topic, queue, offset, max, max_bytes, tags, wait_ms, raw, by_bytes, trace
                    -> status, next, min, max, msgs (maps); with raw: count, cols and one part
                    after the map, the records as stored, back to back (``mqstore.ipc.wire.messages.stored_parts``:
                    msgpack never copies them); with trace: replied_us (the reader's wall clock
                    as it answers, microseconds)
                    capped by RocketMQ's [store] max_transfer_count / max_transfer_bytes (the
                    remoting front's pulls), or with by_bytes by [broker] fetch_max_count /
                    fetch_max_bytes (an ipc consumer's pulls, sized by bytes as Kafka's fetches)
    query_key       topic, key, max, begin_ms, end_ms, raw  -> msgs (with raw: count, cols, the records' part)
    query_keys      topic, keys, max (per key), begin_ms, end_ms
                    -> count, cols, the records' part, counts (how many records each key has, in the keys' order)
    query_uniq      topic, uniq_key                          -> msgs
    view_id         msg_id                                   -> msgs ([] or [one])
    offset_by_time  topic, queue, ts_ms, upper               -> offset
    queue_info      topic                                    -> queues {"queue id": [min, max]}
    commit_offset   group, topic, queue, offset              (reader 0 only: mqstore.actors.reader.offsets)
    fetch_offset    group, topic, queue -> offset (-1: none) (reader 0 only)
    groups, group_describe, delete_topic_offsets             groups' offsets and lag (reader 0 only)
    group_activity                                           -> groups {group: last seen ms}, now_ms (.activity)
    ack_stats                                                -> queues [{group, topic, queue, ready,
                                                             unacked, redelivered, dead}] (its ack queues)
    ping                                                     -> pid, index, readers, readable_end, parked
    ack_pull, ack, nack, ack_release, ack_pull_queues        ack mode (mqstore.actors.reader.ack_groups,
                                                                       mqstore.ipc.wire.receipts)
    watch_queues    topic, known, wait_ms -> queues, once the topic has another (mqstore.actors.reader.topic_watch)
    pull_queues     group, topic, queues [[queue, offset], ...], max, max_bytes, tags, wait_ms, trace -> several
                    queues' pulls in one (mqstore.actors.reader.span_pull)

Long polling (``mqstore.actors.reader.long_poll``): a pull that finds nothing yet, with ``wait_ms > 0``, is
parked and answered as soon as an ``arrived`` notice (or a look at the files) shows its queue grew,
or at its deadline.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.meters import Deliveries, Latencies
from mqstore.actors.reader.ack_groups import AckGroups
from mqstore.actors.reader.activity import GroupActivity
from mqstore.actors.reader.administration import Administration
from mqstore.actors.reader.fields import SYSTEM_ERROR
from mqstore.actors.reader.long_poll import RECHECK_PARKED_MS, ParkedPull, ParkedPulls, PullRequest, is_waitable
from mqstore.actors.reader.long_poll import ParkedSpan as _ParkedSpan
from mqstore.actors.reader.offsets import CommittedOffsets
from mqstore.actors.reader.packed import packed as _packed
from mqstore.actors.reader.packed import pull_reply
from mqstore.actors.reader.poll_set import watch as _watch
from mqstore.actors.reader.purge import QueuePurges
from mqstore.actors.reader.span_pull import SpanPulls
from mqstore.actors.reader.state import LONG_MAX, PublishedStore
from mqstore.actors.reader.topic_watch import TopicWatches
from mqstore.actors.runtime import Runtime
from mqstore.engine.read.lookup import GetResult, PullLimits, TagFilter
from mqstore.ipc.transport.sockets import bind, connect, has_message, recv_first, recv_routed, send_routed
from mqstore.ipc.wire import replies, requests, schema
from mqstore.ipc.wire.messages import record_to_wire
from mqstore.ipc.wire.notices import Arrived
from mqstore.ipc.wire.requests import (
    READER,
    CommitOffset,
    OffsetByTime,
    Ping,
    Pull,
    QueryKey,
    QueryKeys,
    QueryUniq,
    QueueInfo,
    Request,
    UnknownOpError,
    ViewId,
)

log = logging.getLogger("mqstore")

TOPIC_NOT_EXIST = "TOPIC_NOT_EXIST"  # RocketMQ's name for a pull of a topic that is not there
MAX_REQUEST_BYTES = 1024 * 1024    # requests are small; a bigger frame is refused by the socket
MAX_DRAIN_PER_ROUND = 1000          # requests handled before notices and deadlines get a turn
HOUSEKEEPING_MS = 250
REFRESH_FILES_MS = 10_000           # how often retention's deletions are noticed


class ReaderActor:
    def __init__(self, runtime: Runtime, index: int) -> None:
        self.rt = runtime
        self.index = index
        cfg = runtime.config
        self.store_dir = Path(cfg.store_dir)
        self.store = PublishedStore(self.store_dir, cfg.store.geometry, index_enabled=cfg.store.index_enabled,
                                    now_ms=wall_ms, open_files=runtime.open_files)
        self.parked = ParkedPulls()
        self.offsets = CommittedOffsets(self.store_dir, index, self.store, wall_ms)
        self.max_query_count = cfg.store.max_query_count
        self.delivered = Deliveries()  # what pulls and ack-mode pulls delivered, per topic and group (the metrics)
        self.acks = AckGroups(cfg, index, self.store, ctx=runtime.ctx, ingress=runtime.endpoints.own_ingress,
                              now_ms=monotonic_ms, delivered=self.delivered)
        self.activity = GroupActivity(wall_ms)
        self.pull_latency = Latencies()     # a pull answered at once, from its request to its reply
        self.roles = cfg.key_roles()         # what each CURVE client key may do; None: no CURVE, none apply
        self.watches = TopicWatches(self.store, monotonic_ms, cfg.broker.long_poll_max_ms)
        offsets, acks, purges = self.offsets, self.acks, QueuePurges(self.store, self.offsets, self.acks)
        self.pulls = 0  # pull requests served (one queue each); ``spans.requests``: those of several
        self.spans = SpanPulls(self.store, self.parked, purges.floor, cfg.broker, self.delivered, self.pull_latency)
        self._ops: dict[type[Request], Callable[[bytes, Any, Any], dict[str, Any] | None]] = {
            Pull: purges.pulls(self._op_pull), QueryKey: self._op_query_key, QueryKeys: self._op_query_keys,
            QueryUniq: self._op_query_uniq, ViewId: self._op_view_id, OffsetByTime: self._op_offset_by_time,
            QueueInfo: self._op_queue_info, CommitOffset: purges.commits(offsets.op_commit_offset),
            requests.FetchOffset: offsets.op_fetch_offset, Ping: self._op_ping,
            requests.AckPull: acks.op_ack_pull, requests.Ack: acks.op_ack, requests.Nack: acks.op_nack,
            requests.AckRelease: acks.op_ack_release, requests.Groups: offsets.op_groups,
            requests.GroupDescribe: offsets.op_group_describe,
            requests.DeleteTopicOffsets: offsets.op_delete_topic_offsets,
            requests.GroupActivity: self.activity.op_group_activity, requests.AckStats: acks.op_ack_stats,
            requests.OffsetTable: offsets.op_offset_table, requests.MergeOffsets: offsets.op_merge_offsets,
            requests.AckMarks: acks.op_ack_marks, requests.MergeAckMarks: acks.op_merge_ack_marks,
            requests.WatchQueues: self.watches.op_watch_queues, **purges.ops(),
            **Administration(offsets, acks, self.activity).ops(), requests.PullQueues: self.spans.op_pull_queues,
            requests.AckPullQueues: acks.spans.op_ack_pull_queues}
        assert set(self._ops) == set(READER.ops.values()), "every op the reader decodes has its handler"

    # -- the loop ------------------------------------------------------------------------------------

    def run(self) -> None:
        ep = self.rt.endpoints
        router = bind(self.rt.ctx, zmq.ROUTER, ep.reader(self.index), max_msg_bytes=MAX_REQUEST_BYTES,
                      hwm=self.rt.config.broker.reader_hwm)
        arrived_in = connect(self.rt.ctx, zmq.SUB, ep.arrived, hwm=100_000, subscribe=(schema.ARRIVED,))
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(self.rt.stop_fd, zmq.POLLIN)  # a stop ends the round at once
        watching = False  # arrived_in is polled only while a pull waits (``_watch_arrivals``)
        writer = self.acks.start(lambda identity, reply: self._send(router, identity, reply))
        self.watches.send = lambda identity, reply: self._send(router, identity, reply)
        # polled only while a dead letter waits for its reply: every socket in the poll costs each round
        reading_writer = False
        broker = self.rt.config.broker
        now = monotonic_ms()
        next_recheck, next_refresh, next_persist = now + HOUSEKEEPING_MS, now + REFRESH_FILES_MS, now
        try:
            # subscribed before the files are read: whatever lands in between is in a notice or the files
            self.store.learn_from_files()
            while not self.rt.stopping:
                now = monotonic_ms()
                # a tick while a pull waits or an ack-mode queue is open, else until housekeeping is due
                busy = self.parked or self.acks.parked or len(self.acks.queues)
                cap_ms = broker.tick_interval_ms if busy else max(0, min(next_refresh, next_persist) - now)
                timeout_ms = self.acks.ms_to_next(now, self.parked.ms_to_next_deadline(now, self.watches.ms_to_next(
                    now, cap_ms)))
                watching = self._watch_arrivals(poller, arrived_in, watching)
                reading_writer = _watch(poller, writer, reading_writer, self.acks.awaiting_writer)
                ready = self.rt.poll(poller, timeout_ms)
                if arrived_in in ready or not watching:
                    self._on_arrived(router, arrived_in)
                if router in ready:
                    self._serve(router)
                if reading_writer and writer in ready:
                    self.acks.on_writer_reply()
                now = monotonic_ms()
                self.acks.tick(now)
                for parked in self.parked.expired(now):
                    self._answer(router, parked)
                self.watches.tick(now)
                if now >= next_recheck:
                    next_recheck = now + HOUSEKEEPING_MS
                    self._recheck_parked(router, now)
                if now >= next_refresh:
                    next_refresh = now + REFRESH_FILES_MS
                    self.store.refresh_files()
                if now >= next_persist:
                    next_persist = now + broker.offset_persist_interval_ms
                    self.offsets.persist(final=False)
                self.rt.report("running", readable_end=self.store.readable_end, parked=len(self.parked),
                               ack_queues=len(self.acks.queues), **self.delivered.stats(),
                               pull_latency=self.pull_latency.stats(), commits=self.offsets.commits,
                               pulls=self.pulls, span_pulls=self.spans.requests)
            # consumers should not wait out a long poll on a reader that is going away
            for parked in self.parked.drain():
                self._answer(router, parked)
            self.watches.drain()
            self.acks.close()
            self.offsets.persist(final=True)
        finally:
            self.rt.report("stopped", force=True, readable_end=self.store.readable_end)
            self.store.close()

    def _watch_arrivals(self, poller: zmq.Poller, arrived_in: zmq.Socket[Any], watching: bool) -> bool:
        """Whether ``arrived`` notices wake the loop: only while a pull is parked. Otherwise they wait on
        their socket and every round reads them before its requests: a pull sees all they say, without
        a wake-up for each round of the consume-queue builder (nor, idle, for the writer's ticks)."""
        return _watch(poller, arrived_in, watching, bool(self.parked or self.acks.parked or self.watches))

    def _on_arrived(self, router: zmq.Socket[Any], arrived_in: zmq.Socket[Any]) -> None:
        grew: set[tuple[str, int]] = set()
        while has_message(arrived_in):
            frames = arrived_in.recv_multipart(zmq.NOBLOCK)
            try:
                if len(frames) != 2:
                    raise schema.SchemaError("an arrived notice has two frames")
                notice = Arrived.decode(frames[1])
            except schema.SchemaError as exc:
                log.warning("ignoring a malformed arrived notice: %s", exc)
                continue
            self.store.on_arrived(list(notice.queues), notice.applied)  # every queue named is woken: a request's
            grew.update(queue[:2] for queue in notice.queues)  # read of its files may have grown it first, unwoken
        for key in grew:
            self._wake(router, key)
            self.acks.on_grew(*key)
        self.watches.on_grew(grew)

    def _recheck_parked(self, router: zmq.Socket[Any], now_ms: int) -> None:
        for key in self.parked.due_for_recheck(now_ms, RECHECK_PARKED_MS):
            if self.store.recheck(*key):
                self._wake(router, key)
                self.acks.on_grew(*key)

    def _wake(self, router: zmq.Socket[Any], key: tuple[str, int]) -> None:
        """Run again every pull parked on ``key``; answer those that now have something."""
        for parked in self.parked.take(key):
            if isinstance(parked, _ParkedSpan):
                if (reply := self.spans.wake(parked)) is not None:
                    self._send(router, parked.identity, reply)
                continue
            try:
                result = self._pull(parked.pull)
            except Exception:
                self._answer(router, parked)  # which turns the fault into an error reply
                continue
            if is_waitable(result):
                # everything new was filtered out by tag: wait on from where the filter got to
                self.parked.park(parked.after(result), monotonic_ms(), RECHECK_PARKED_MS)
            else:
                self._send(router, parked.identity, pull_reply(parked.request_id, parked.pull, result, self.delivered))

    def _answer(self, router: zmq.Socket[Any], parked: ParkedPull | _ParkedSpan) -> None:
        """Answer a parked pull with what its queues hold now."""
        try:
            reply = (self.spans.answer(parked) if isinstance(parked, _ParkedSpan) else
                     pull_reply(parked.request_id, parked.pull, self._pull(parked.pull), self.delivered))
        except Exception as exc:  # the same boundary as _handle: the client hears, the log has it
            log.exception("parked pull failed")
            reply = schema.error_reply(parked.request_id, SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        self._send(router, parked.identity, reply)

    def _send(self, router: zmq.Socket[Any], identity: bytes, reply: dict[str, Any]) -> None:
        try:
            parts = reply.pop("parts", ())
            send_routed(router, identity, *schema.pack_message(reply, parts))
        except zmq.Again:
            log.warning("a client does not read its replies; reply dropped")

    # -- requests ------------------------------------------------------------------------------------

    def _serve(self, router: zmq.Socket[Any]) -> None:
        """The requests waiting (the poll saw the first), up to MAX_DRAIN_PER_ROUND."""
        by_key = self.roles is not None and self.roles.poll()  # whose key sent each request matters
        for count in range(MAX_DRAIN_PER_ROUND):
            if count and not has_message(router):
                return
            first, user_id = recv_first(router, zmq.NOBLOCK) if by_key else (None, None)
            frames = recv_routed(router, first)
            reply = self.handle(frames, user_id)
            if reply is not None:
                self._send(router, frames[0], reply)

    def handle(self, frames: list[bytes], user_id: str | None = None) -> dict[str, Any] | None:
        """The error boundary: every request gets a reply (None: parked), and nothing a client sends
        stops the reader. ``user_id``: the CURVE key that sent it, where roles are in force."""
        request_id: Any = None
        try:
            if len(frames) != 2:
                raise schema.SchemaError(f"expected one frame after the identity, got {len(frames) - 1}")
            message = schema.unpack(frames[1], max_bytes=MAX_REQUEST_BYTES)
            request_id = message.get("id")
            if not isinstance(request_id, (int, str, type(None))) or isinstance(request_id, bool):
                request_id = None
                raise schema.SchemaError("id must be an integer or a string")
            request = requests.decode_request(message, READER)
            refusal = self.roles.refusal(user_id, request) if self.roles is not None else None
            if refusal is not None:
                return schema.error_reply(request_id, schema.NO_PERMISSION, refusal)
            if isinstance(request, (Pull, CommitOffset, requests.AckPull, requests.PullQueues,
                                    requests.AckPullQueues)) and not (
                    isinstance(request, CommitOffset) and request.admin):  # a consumer alive (group reset asks)
                self.activity.saw(request.group or "")
            return self._ops[type(request)](frames[0], request_id, request)
        except UnknownOpError as exc:
            return schema.error_reply(request_id, schema.UNKNOWN_OP, str(exc))
        except (schema.SchemaError, ValueError) as exc:
            return schema.error_reply(request_id, schema.BAD_REQUEST, str(exc))
        except Exception as exc:  # a bug or an unreadable file: the client hears of it, the log has it
            log.exception("request failed")
            return schema.error_reply(request_id, SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    def _op_pull(self, identity: bytes, request_id: Any, request: Pull) -> dict[str, Any] | None:
        started = time.perf_counter()
        self.pulls += 1
        reply = self._pull_now_or_park(identity, request_id, request)
        if reply is not None:
            self.pull_latency.observe(time.perf_counter() - started)
        return reply

    def _pull_now_or_park(self, identity: bytes, request_id: Any, request: Pull) -> dict[str, Any] | None:
        cfg = self.rt.config
        if request.by_bytes:
            caps = (cfg.broker.fetch_max_count, cfg.broker.fetch_max_bytes)
        else:
            caps = (cfg.store.max_transfer_count, cfg.store.max_transfer_bytes)
        requests.at_most("wait_ms", request.wait_ms, cfg.broker.long_poll_max_ms)
        pull = PullRequest(
            group=request.group or "", topic=request.topic, queue_id=request.queue_id,
            queue_offset=request.queue_offset,
            limits=PullLimits(request.max_count or 32, request.max_bytes or cfg.store.max_transfer_bytes, *caps),
            tag_filter=TagFilter.parse(request.tags if request.tags is not None else "*"),
            raw=bool(request.raw), trace=bool(request.trace),
        )
        wait_ms = request.wait_ms or 0
        result = self._pull(pull)
        # a dropped notice must not make a consumer wait: look at the files before waiting
        if is_waitable(result) and self.store.recheck(pull.topic, pull.queue_id):
            result = self._pull(pull)
        if is_waitable(result) and self.store.deleted(pull.topic, pull.queue_id):
            return schema.error_reply(request_id, TOPIC_NOT_EXIST, f"topic {pull.topic!r} was deleted")
        if wait_ms > 0 and is_waitable(result) and not self.parked.full:
            now = monotonic_ms()
            self.parked.park(ParkedPull(identity, request_id, pull, now + wait_ms).after(result), now,
                             RECHECK_PARKED_MS)
            return None
        return pull_reply(request_id, pull, result, self.delivered)

    def _pull(self, pull: PullRequest) -> GetResult:
        return self.store.pull(pull.topic, pull.queue_id, pull.queue_offset, pull.limits, pull.tag_filter,
                               stored=pull.raw)

    def _op_query_key(self, identity: bytes, request_id: Any, request: QueryKey) -> dict[str, Any]:
        return self._query(request_id, request.topic, [request.key], request.max_count, request.begin_ms,
                           request.end_ms, raw=bool(request.raw))

    def _op_query_keys(self, identity: bytes, request_id: Any, request: QueryKeys) -> dict[str, Any]:
        return self._query(request_id, request.topic, list(request.keys), request.max_count, request.begin_ms,
                           request.end_ms, raw=True, counts=True)

    def _op_query_uniq(self, identity: bytes, request_id: Any, request: QueryUniq) -> dict[str, Any]:
        return self._query(request_id, request.topic, [request.uniq_key], None, None, None, raw=bool(request.raw),
                           uniq=True)

    def _query(self, request_id: Any, topic: str, keys: list[str], max_count: int | None, begin_ms: int | None,
               end_ms: int | None, *, raw: bool, uniq: bool = False, counts: bool = False) -> dict[str, Any]:
        """A query's reply: maps, or with ``raw`` the records as stored (and with ``counts`` how many
        each key has); and how far the index goes. None: all of time, [store] max_query_count."""
        most = min(max_count or self.max_query_count, self.max_query_count)
        begin = begin_ms or 0
        end = LONG_MAX if end_ms is None else end_ms
        index_ms, index_phys = self._index_marks()
        if not raw:
            records = self.store.query_by_key(topic, keys[0], most, begin, end, uniq=uniq)
            return replies.MessagesReply([record_to_wire(r) for r in records], index_ms, index_phys).encode(request_id)
        stored, key_counts = self.store.query_keys(topic, keys, most, begin, end, uniq=uniq)
        return replies.PackedRecordsReply(*_packed(stored), key_counts if counts else None, index_ms,
                                          index_phys).encode(request_id)

    def _op_view_id(self, identity: bytes, request_id: Any, request: ViewId) -> dict[str, Any]:
        found = self.store.view_by_id(request.msg_id)
        records = [] if found is None else [found]
        if not request.raw:
            return replies.MessagesReply([record_to_wire(r) for r in records]).encode(request_id)
        return replies.PackedRecordsReply(*_packed(self.store.stored(records))).encode(request_id)

    def _op_offset_by_time(self, identity: bytes, request_id: Any, request: OffsetByTime) -> dict[str, Any]:
        queue_offset = self.store.queue_offset_by_time(request.topic, request.queue_id, request.ts_ms,
                                                       upper=bool(request.upper))
        return replies.OffsetReply(queue_offset).encode(request_id)

    def _op_queue_info(self, identity: bytes, request_id: Any, request: QueueInfo) -> dict[str, Any]:
        return replies.QueueInfoReply(dict(self.store.queue_info(request.topic))).encode(request_id)

    def _op_ping(self, identity: bytes, request_id: Any, request: Ping) -> dict[str, Any]:
        return replies.ReaderPingReply(os.getpid(), self.index, self.rt.config.broker.readers, self.store.readable_end,
                                       len(self.parked) + self.acks.parked_count).encode(request_id)

    def _index_marks(self) -> tuple[int | None, int | None]:
        """How far the index goes (RocketMQ's indexLastUpdateTimestamp / ...Phyoffset); None: no index."""
        last = self.store.index.last_file if self.store.index is not None else None
        return (last.end_ms, last.end_phys_offset) if last is not None else (None, None)
