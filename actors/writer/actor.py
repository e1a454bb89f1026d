"""commitlog-writer: the only writer of ``commitlog/``.

Producers' DEALERs send ``send`` requests to the ROUTER ``ingress``. Every poll round drains what
waits there and appends it as one batch (one copy per file), then:

- ASYNC_FLUSH: answers each producer at once (the bytes are in the page cache) and publishes the
  batch's DispatchRequests on ``dispatch``;
- SYNC_FLUSH: publishes ``written`` with ``sync`` set, and answers (and dispatches) only once the
  flush service's ``flushed`` notice covers the batch; a notice that does not come within the sync
  timeout answers FLUSH_DISK_TIMEOUT (the record is in the log and becomes visible once flushed).

Every tick it publishes ``tick`` (how far builders may apply) and ``written`` (how far the log goes),
so a dropped notice only delays. On start it finds the log's end itself: from what the consume
queues cover, records are checked with their CRCs, the torn tail of a killed predecessor is cut, and
queue offsets continue from the records found.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq

from actors.reader.ack_groups import unacked_low_water
from actors.runtime import Runtime, monotonic_ms, wall_ms
from actors.writer import encoded as encoded_sends
from actors.writer.prefault import PrefaultThread, ahead_bytes_for
from engine import Host, Message, PutResult, PutStatus
from engine.batch.dispatch import DispatchBatch, DispatchRequest
from engine.consumequeue.store import ConsumeQueueStore
from engine.jhash import java_hash
from engine.log.commitlog import CommitLog
from engine.log.mapped_file import MappedFile
from engine.log.msgid import UniqKeyGenerator
from engine.log.record import SYSFLAG_COMPRESSED, SYSFLAG_MULTI_TAGS, DecodeKind
from engine.log.writer import CommitLogWriter
from engine.retention import CleanupDecision, decide, delete_expired_commitlog, disk_used_ratio
from engine.topics import TopicError, TopicTable
from ipc import schema
from ipc.encoded import OP_ENCODING, OP_SEND_ENCODED
from ipc.notices import Dispatch, Flushed, Tick, Written
from ipc.sockets import bind, connect, recv_message

log = logging.getLogger("mqstore")

OP_SEND = "send"
OP_TOPICS = "topics"
OP_CREATE_TOPIC = "create_topic"
OP_PING = "ping"
CLIENT_SYS_FLAGS = SYSFLAG_COMPRESSED | SYSFLAG_MULTI_TAGS


@dataclass(slots=True)
class PendingSync:
    end: int                 # acknowledged once flushed reaches this
    deadline_ms: int
    identity: bytes
    request_id: Any
    results: list[dict[str, Any]]
    packed: dict[str, Any] | None = None  # an encoded send's reply fields (results are then empty)


def result_fields(r: PutResult) -> dict[str, Any]:
    if not r.ok:
        return {"status": r.status.value, "reason": r.reason}
    return {"status": r.status.value, "msg_id": r.msg_id, "queue": r.queue_id, "queue_offset": r.queue_offset,
            "phys_offset": r.phys_offset, "uniq_key": r.uniq_key}


class CommitLogWriterActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        cfg = runtime.config
        self.store_dir = Path(cfg.store_dir)
        self.commitlog = CommitLog.open(self.store_dir / "commitlog", cfg.store.geometry.commitlog_file_size)
        # a roll renames the flush service's spare (engine.log.page_warmer); adopted whatever [flush] spare_file
        # says, so a spare left by an earlier run with it on is used once rather than kept as dead disk
        self.commitlog.queue.adopt_spares = True
        offsets = self._recover_tail()
        uniq = UniqKeyGenerator.for_this_process(wall_ms, cfg.store.store_host.packed[:-4])
        self.writer = CommitLogWriter(self.commitlog, cfg.store, offsets, uniq)
        self.prefault = PrefaultThread(ahead_bytes_for(cfg.store.prefault_ahead_bytes, cfg.sync_flush))
        # deferred: a burst of new topics costs one topics.json write per tick, not one each (a topic
        # lost with a crash comes back on its next send; its queues and their files are on disk)
        self.topics = TopicTable.load(self.store_dir, wall_ms, max_topics=cfg.broker.max_topics, deferred=True)
        self.round_robin: dict[str, int] = {}
        self.flushed_end = 0
        self.pending: deque[PendingSync] = deque()
        self.undispatched: deque[tuple[int, int, DispatchBatch | list[DispatchRequest]]] = deque()  # SYNC: unflushed
        self.encoded: list[tuple[bytes, Any, dict[str, Any]]] = []  # send_encoded requests of this round
        self.dispatched_end = self.commitlog.max_offset
        self.last_store_ms = 0
        self.disk: CleanupDecision | None = None  # the last disk check; sends refused while it says full
        self.next_disk_check_ms = 0
        self.next_clean_ms = monotonic_ms() + cfg.broker.clean_interval_ms

    def _recover_tail(self) -> dict[tuple[str, int], int]:
        """The log's true end and every queue's next offset, whatever a killed writer left."""
        geometry = self.rt.config.store.geometry
        queues = ConsumeQueueStore.open(self.store_dir / "consumequeue", geometry.cq_entries_per_file,
                                        writable=False)
        try:
            offsets, covered = queues.published_state()
        finally:
            queues.close()
        end = max(covered, self.commitlog.min_offset)
        for phys, decoded in self.commitlog.scan(end, require_prop_crc=geometry.prop_crc, read_body=False):
            if decoded.kind is DecodeKind.RECORD and decoded.record is not None:
                end = phys + decoded.size
                record = DispatchRequest.from_record(decoded.record)
                if record.has_queue_entry:
                    key = (record.topic, record.queue_id)
                    offsets[key] = max(offsets.get(key, 0), record.queue_offset + 1)
            elif decoded.kind is DecodeKind.BLANK:
                end = self.commitlog.queue.roll_next(phys)
        if self.commitlog.queue.files:
            self.commitlog.queue.truncate_after(end)
        log.info("commitlog ends at %d; %d queues", end, len(offsets))
        return offsets

    # -- the loop ----------------------------------------------------------------------------------

    def run(self) -> None:
        ep = self.rt.endpoints
        ctx = self.rt.ctx
        max_bytes = self.rt.config.broker.max_request_bytes
        # inbound bounded (a flood waits in the sender); replies not: a pipelining producer must get every one
        ingress = bind(ctx, zmq.ROUTER, ep.ingress, max_msg_bytes=max_bytes, rcvhwm=self.rt.config.broker.ingress_hwm)
        dispatch_out = bind(ctx, zmq.PUB, ep.dispatch, hwm=100_000)
        written_out = bind(ctx, zmq.PUB, ep.written)
        flushed_in = connect(ctx, zmq.SUB, ep.flushed, subscribe=(schema.FLUSHED,))
        poller = zmq.Poller()
        poller.register(ingress, zmq.POLLIN)
        poller.register(flushed_in, zmq.POLLIN)
        tick_ms = self.rt.config.broker.tick_interval_ms
        next_tick = 0
        self.prefault.start()
        try:
            while not self.rt.stopping:
                ready = dict(poller.poll(tick_ms))
                if flushed_in in ready:
                    self._on_flushed(flushed_in)
                if ingress in ready:
                    self._serve(ingress, dispatch_out, written_out)
                    self.prefault.hand(self.commitlog.queue.last_file)
                self._release(ingress, dispatch_out)
                now = monotonic_ms()
                if now >= next_tick:
                    next_tick = now + tick_ms
                    self._tick(dispatch_out, written_out)
                if now >= self.next_disk_check_ms:
                    self._check_disk(now)
            self._drain_sync(ingress, dispatch_out, flushed_in)
            self._tick(dispatch_out, written_out)
        finally:
            self.rt.report("stopped", force=True, written=self.commitlog.max_offset)
            self.prefault.stop()
            self.commitlog.close()

    def _tick(self, dispatch_out: zmq.Socket[Any], written_out: zmq.Socket[Any]) -> None:
        end = self.commitlog.max_offset
        written_out.send_multipart(Written(end, self.last_store_ms, bool(self.pending)).frames())
        dispatch_out.send_multipart(Tick(self.dispatched_end).frames())
        try:
            self.topics.flush()
        except OSError:
            log.exception("cannot persist topics; retrying")  # the table stays dirty: the next tick tries
        self.rt.report("running", written=end, flushed=self.flushed_end, dispatched=self.dispatched_end,
                       pending_sync=len(self.pending), spares_adopted=self.commitlog.queue.spares_adopted,
                       prefaulted=self.prefault.prefault.populated_bytes)

    def _check_disk(self, now: int) -> None:
        """Watermarks: past the warning ratio sends are refused until usage drops; cleanup runs on
        its cadence, or at once when the disk is past the forcible ratio."""
        cfg = self.rt.config
        self.next_disk_check_ms = now + cfg.broker.disk_check_interval_ms
        was_full = self.disk is not None and self.disk.disk_full
        self.disk = decide(cfg.retention, disk_used_ratio(self.store_dir / "commitlog"), wall_ms())
        if self.disk.disk_full != was_full:
            log.warning("disk %.0f%% used: sends %s", self.disk.used_ratio * 100,
                        "refused" if self.disk.disk_full else "accepted again")
        if now >= self.next_clean_ms or self.disk.clean_immediately:
            self.next_clean_ms = now + cfg.broker.clean_interval_ms
            with self.prefault.paused():  # no file is unmapped under the prefault thread
                deleted = delete_expired_commitlog(self.commitlog, cfg.retention, self.disk, wall_ms(),
                                                   self._unacked_veto())
            if deleted:
                log.info("deleted %d commitlog file(s) (%s); the log now starts at %d", deleted, self.disk.reason,
                         self.commitlog.min_offset)

    def _unacked_veto(self) -> Callable[[MappedFile], bool] | None:
        """With ``keep_unacked``: a file may go only when it ends before every ack-mode group's oldest
        unacked message (the readers' low-water marks; RabbitMQ's reference counting, per file)."""
        if not self.rt.config.retention.keep_unacked:
            return None
        low = unacked_low_water(self.store_dir, self.rt.config.broker.readers)
        if low is None:
            return None
        return lambda mf: mf.file_end <= low

    def _on_flushed(self, flushed_in: zmq.Socket[Any]) -> None:
        while True:
            try:
                _, frame = flushed_in.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                self.flushed_end = max(self.flushed_end, Flushed.decode(frame).end)
            except schema.SchemaError:
                log.warning("ignoring a malformed flushed notice")

    def _serve(self, ingress: zmq.Socket[Any], dispatch_out: zmq.Socket[Any], written_out: zmq.Socket[Any]) -> None:
        """Drain the ingress queue into one append: at most max_batch_messages, and about one
        max_request_bytes of frames (a flood of big frames is taken a request's worth at a time)."""
        cfg = self.rt.config
        batch: list[tuple[bytes, Any, list[Message], list[int], list[PutResult | None]]] = []
        count = size = 0
        while count < cfg.broker.max_batch_messages and size < cfg.broker.max_request_bytes:
            try:  # parts (a send_encoded's records) stay in ZeroMQ's buffers until appended
                frames, parts = recv_message(ingress, zmq.NOBLOCK, head=2)
            except zmq.Again:
                break
            size += sum(map(len, frames)) + sum(map(len, parts))
            identity, parsed = self._parse(ingress, frames, parts)
            if parsed is None:
                continue
            batch.append((identity, *parsed))
            count += len(parsed[1])
        if self.encoded:
            encoded, self.encoded = self.encoded, []
        else:
            encoded = []
        if batch:
            self._write_messages(batch, ingress, dispatch_out, written_out)
        if encoded:
            encoded_sends.write_round(self, encoded, ingress, dispatch_out, written_out)

    def _write_messages(self, batch: list[tuple[bytes, Any, list[Message], list[int], list[PutResult | None]]],
                        ingress: zmq.Socket[Any], dispatch_out: zmq.Socket[Any], written_out: zmq.Socket[Any]
                        ) -> None:
        cfg = self.rt.config
        if self.disk is not None and self.disk.disk_full:
            reason = (f"disk {self.disk.used_ratio:.0%} used, past {cfg.retention.disk_warning_ratio:.0%}: "
                      "sends are refused until space returns")
            for identity, request_id, _, _, refused in batch:
                fields = [result_fields(r) if r is not None else {"status": PutStatus.SERVICE_NOT_AVAILABLE.value,
                                                                   "reason": reason} for r in refused]
                self._reply(ingress, identity, schema.ok_reply(request_id, results=fields))
            return
        messages = [m for _, _, msgs, _, _ in batch for m in msgs]
        queue_ids = [q for _, _, _, qids, _ in batch for q in qids]
        start = self.commitlog.max_offset
        outcome = self.writer.write(messages, queue_ids, wall_ms())
        end = self.commitlog.max_offset
        if outcome.requests:
            self.last_store_ms = outcome.store_ms
        results = iter(outcome.results)
        replies = []
        for identity, request_id, _, _, refused in batch:
            fields = [result_fields(r if r is not None else next(results)) for r in refused]
            replies.append((identity, request_id, fields))
        if cfg.sync_flush and outcome.requests:
            written_out.send_multipart(Written(end, outcome.store_ms, True).frames())
            deadline = monotonic_ms() + cfg.flush.sync_timeout_ms
            for identity, request_id, fields in replies:
                self.pending.append(PendingSync(end, deadline, identity, request_id, fields))
            self.undispatched.append((start, end, outcome.requests))
        else:
            for identity, request_id, fields in replies:
                self._reply(ingress, identity, schema.ok_reply(request_id, results=fields))
            if outcome.requests:
                self._publish(dispatch_out, start, end, outcome.requests)

    def _hold_for_flush(self, end: int, identity: bytes, request_id: Any, packed: dict[str, Any]) -> None:
        """SYNC_FLUSH: an encoded send's reply waits for the flush to reach ``end``."""
        self.pending.append(PendingSync(end, monotonic_ms() + self.rt.config.flush.sync_timeout_ms, identity,
                                        request_id, [], packed))

    def _publish(self, dispatch_out: zmq.Socket[Any], start: int, end: int,
                 requests: DispatchBatch | list[DispatchRequest]) -> None:
        batch = requests if isinstance(requests, DispatchBatch) else DispatchBatch.from_requests(requests)
        dispatch_out.send_multipart(Dispatch(start, end, batch).frames())
        self.dispatched_end = max(self.dispatched_end, end)

    def _release(self, ingress: zmq.Socket[Any], dispatch_out: zmq.Socket[Any]) -> None:
        """SYNC_FLUSH: answer what the flush covers, time out what waited too long."""
        while self.undispatched and self.undispatched[0][1] <= self.flushed_end:
            start, end, requests = self.undispatched.popleft()
            self._publish(dispatch_out, start, end, requests)
        now = monotonic_ms()
        while self.pending and (self.pending[0].end <= self.flushed_end or self.pending[0].deadline_ms <= now):
            p = self.pending.popleft()
            if p.end > self.flushed_end:
                for fields in p.results:
                    if fields["status"] == PutStatus.PUT_OK.value:
                        fields["status"] = PutStatus.FLUSH_DISK_TIMEOUT.value
                if p.packed is not None:
                    p.packed["written_status"] = PutStatus.FLUSH_DISK_TIMEOUT.value
            if p.packed is not None:
                self._reply(ingress, p.identity, schema.ok_reply(p.request_id, **p.packed))
            else:
                self._reply(ingress, p.identity, schema.ok_reply(p.request_id, results=p.results))

    def _drain_sync(self, ingress: zmq.Socket[Any], dispatch_out: zmq.Socket[Any],
                    flushed_in: zmq.Socket[Any]) -> None:
        """On stop, give waiting SYNC_FLUSH sends their flush, or their timeout: never wait longer
        than the sync timeout (the flush service may be gone). Batches still not dispatched are
        read back from the commitlog by the builders, or by the supervisor's final catch-up."""
        deadline = monotonic_ms() + self.rt.config.flush.sync_timeout_ms
        while (self.pending or self.undispatched) and monotonic_ms() < deadline:
            if flushed_in.poll(50):
                self._on_flushed(flushed_in)
            self._release(ingress, dispatch_out)
        self._release(ingress, dispatch_out)
        self.undispatched.clear()

    def _reply(self, ingress: zmq.Socket[Any], identity: bytes, message: dict[str, Any]) -> None:
        try:
            ingress.send_multipart([identity, schema.pack(message)], zmq.NOBLOCK)
        except zmq.Again:
            log.warning("a producer does not read its replies; reply dropped")

    # -- requests ----------------------------------------------------------------------------------

    def _parse(self, ingress: zmq.Socket[Any], frames: list[bytes], parts: list[memoryview]
               ) -> tuple[bytes, tuple[Any, list[Message], list[int], list[PutResult | None]] | None]:
        """A send request becomes messages and queue ids; a send_encoded waits for the end of the
        round; anything else is answered right here. Only a send_encoded carries parts."""
        identity = frames[0]
        request_id: Any = None
        try:
            if len(frames) != 2:
                raise schema.SchemaError("expected a map frame after the identity")
            message = schema.unpack_message(frames[1], parts, max_bytes=self.rt.config.broker.max_request_bytes)
            request_id = message.get("id")
            op = schema.field(message, "op", str)
            if parts and op != OP_SEND_ENCODED:
                raise schema.SchemaError(f"{op!r} takes no frames after its map, got {len(parts)}")
            if op == OP_SEND:
                return identity, (request_id, *self._messages(message))
            if op == OP_SEND_ENCODED:
                self.encoded.append((identity, request_id, message))
                return identity, None
            self._reply(ingress, identity, self._admin(op, message, request_id))
        except schema.SchemaError as exc:
            self._reply(ingress, identity, schema.error_reply(request_id, schema.BAD_REQUEST, str(exc)))
        return identity, None

    def _admin(self, op: str, message: dict[str, Any], request_id: Any) -> dict[str, Any]:
        if op == OP_ENCODING:
            return schema.ok_reply(request_id, **encoded_sends.encoding_fields(self.rt.config.store))
        if op == OP_PING:
            return schema.ok_reply(request_id, pid=os.getpid(), written=self.commitlog.max_offset)
        if op == OP_TOPICS:
            return schema.ok_reply(request_id, topics={t.name: t.queue_count for t in self.topics.topics.values()})
        if op == OP_CREATE_TOPIC:
            name = schema.field(message, "topic", str)
            queues = schema.field(message, "queues", int, default=self.rt.config.broker.default_queues, lo=1,
                                  hi=self.rt.config.broker.max_queues)
            try:
                topic = self.topics.create(name, queues)
                self.topics.flush()  # an explicit queue count is written before it is confirmed
            except TopicError as exc:
                return schema.error_reply(request_id, PutStatus.MESSAGE_ILLEGAL.value, str(exc))
            return schema.ok_reply(request_id, topic=topic.name, queues=topic.queue_count)
        return schema.error_reply(request_id, schema.UNKNOWN_OP, f"the writer does not serve {op!r}")

    def _messages(self, message: dict[str, Any]) -> tuple[list[Message], list[int], list[PutResult | None]]:
        raw_msgs = schema.field(message, "msgs", list)
        if not raw_msgs or len(raw_msgs) > self.rt.config.broker.max_batch_messages:
            raise schema.SchemaError(f"a send carries 1 to {self.rt.config.broker.max_batch_messages} messages")
        messages: list[Message] = []
        queue_ids: list[int] = []
        refused: list[PutResult | None] = []
        for raw in raw_msgs:
            if not isinstance(raw, dict):
                raise schema.SchemaError("each message must be a map")
            msg = _message(raw)
            queue_id = self._queue_for(msg.topic, raw)
            if isinstance(queue_id, PutResult):
                refused.append(queue_id)
                continue
            messages.append(msg)
            queue_ids.append(queue_id)
            refused.append(None)
        return messages, queue_ids, refused

    def _queue_for(self, topic: str, raw: dict[str, Any]) -> int | PutResult:
        """An explicit queue, a sharding key's queue, or the next queue round robin."""
        try:
            config = self.topics.get_or_create(topic, self.rt.config.broker.default_queues)
        except TopicError as exc:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=str(exc))
        except OSError as exc:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=f"cannot persist topics: {exc}")
        queue = schema.field(raw, "queue", int, default=None)
        if queue is not None:
            if not 0 <= queue < config.queue_count:
                return PutResult(PutStatus.MESSAGE_ILLEGAL,
                                 reason=f"queue id {queue} out of range: {topic} has {config.queue_count} queues")
            return int(queue)
        shard = schema.field(raw, "shard", str, default=None)
        if shard is not None:
            return abs(java_hash(shard)) % config.queue_count
        n = self.round_robin.get(topic, 0)
        self.round_robin[topic] = n + 1
        return n % config.queue_count


def _message(raw: dict[str, Any]) -> Message:
    body = schema.field(raw, "body", bytes)
    keys = schema.field(raw, "keys", list, default=[])
    props = schema.field(raw, "props", dict, default={})
    if not all(isinstance(k, str) for k in keys):
        raise schema.SchemaError("keys must be strings")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise schema.SchemaError("properties must map strings to strings")
    born_host = schema.field(raw, "born_host", list, default=None)
    if born_host is not None:
        if not (len(born_host) == 2 and isinstance(born_host[0], str) and isinstance(born_host[1], int)
                and 0 <= born_host[1] < 65536):
            raise schema.SchemaError("born_host must be [ip, port]")
        try:
            ipaddress.ip_address(born_host[0])
        except ValueError:
            raise schema.SchemaError(f"born_host address {born_host[0]!r} is not an IP address") from None
    return Message(topic=schema.field(raw, "topic", str), body=body, tags=schema.field(raw, "tags", str, default=None),
                   keys=tuple(keys), properties=props, flag=schema.field(raw, "flag", int, default=0, lo=-(2**31),
                                                                          hi=2**31 - 1),
                   born_ms=schema.field(raw, "born_ms", int, default=None, lo=0, hi=2**63 - 1),
                   born_host=Host(born_host[0], born_host[1]) if born_host else None,
                   reconsume_times=schema.field(raw, "reconsume_times", int, default=0, lo=0, hi=2**31 - 1),
                   sys_flag=_client_sys_flag(raw))


def _client_sys_flag(raw: dict[str, Any]) -> int:
    """The sysFlag bits a client may set: its body is compressed, its tags are several. Transaction
    states are not served, and the host bits are the writer's to set."""
    sys_flag: int = schema.field(raw, "sys_flag", int, default=0, lo=0, hi=2**31 - 1)
    if sys_flag & ~CLIENT_SYS_FLAGS:
        raise schema.SchemaError(f"sys_flag {sys_flag:#x} sets bits other than compressed / multi tags")
    return sys_flag
