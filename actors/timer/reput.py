"""Due timer messages on their way back through the writer's ingress, like any producer's.

The actor is a producer here: a DEALER to the writer's ROUTER, one ``send`` per batch, and it waits
for the answer before it records the batch as delivered. Each copy is RocketMQ's convert of the
timer topic's record: body, flag, born time and host, reconsume times and the client's sysFlag bits
copied, every property kept (``REAL_TOPIC``, ``REAL_QID`` and ``TIMER_OUT_MS`` too, as RocketMQ
leaves them), ``TIMER_ENQUEUE_MS`` / ``TIMER_DEQUEUE_MS`` and ``WAIT=false`` added, and mqstore's
``TIMER_FROM_PHYS_OFFSET``: the commitlog offset of the record it came from, which names the copy.
A rolled record goes back to the timer topic instead, ``TIMER_ROLL_TIMES`` one higher.

``copies_since`` reads the commitlog for those names: what a batch whose answer never came (a
killed actor, a writer that restarted) stored after all.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms
from mqstore.engine.batch.record_batch import CLIENT_SYS_FLAGS
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import PROP_CRC_KEY, PROP_KEYS, PROP_TAGS, DecodeKind, Record
from mqstore.engine.timer.log import TimerRecord
from mqstore.engine.timer.put_rule import (
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TIMER_DEQUEUE_MS,
    PROP_TIMER_ENQUEUE_MS,
    PROP_TIMER_FROM_PHYS,
    PROP_TIMER_ROLL_TIMES,
    TIMER_TOPIC,
)
from mqstore.ipc.transport.sockets import connect
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests import Ping, Send, SendMessage

log = logging.getLogger("mqstore")

REPLY_TIMEOUT_MS = 5_000
FRESH_MS = 1_000
PUT_OK = "PUT_OK"
FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # stored, not flushed in time: done (a retry would store it twice)
STORED = (PUT_OK, FLUSH_DISK_TIMEOUT)
DROPPED = ("MESSAGE_ILLEGAL", "PROPERTIES_SIZE_EXCEEDED")  # RocketMQ retries neither


@dataclass(frozen=True, slots=True)
class Copy:
    """A due message's copy, and where it came from."""

    log_pos: int
    phys_offset: int
    wire: SendMessage


def copy_of(log_pos: int, timer: TimerRecord, record: Record, now_ms: int) -> Copy | None:
    """The copy to put for ``record`` (the rmq_sys_wheel_timer one ``timer`` points at); None when it
    names no real topic to go to."""
    props = {k: v for k, v in record.properties.items() if k not in (PROP_TAGS, PROP_KEYS, PROP_CRC_KEY)}
    topic: str | None
    if timer.rolled:
        topic, queue_id = TIMER_TOPIC, 0
        props[PROP_TIMER_ROLL_TIMES] = str(int(props.get(PROP_TIMER_ROLL_TIMES, "0") or 0) + 1)
    else:
        topic, qid = props.get(PROP_REAL_TOPIC), props.get(PROP_REAL_QID, "")
        if not topic or not qid.isdigit():
            return None
        queue_id = int(qid)
        props[PROP_TIMER_ENQUEUE_MS] = str(timer.write_ms)
        props[PROP_TIMER_DEQUEUE_MS] = str(now_ms)
    props["WAIT"] = "false"
    props[PROP_TIMER_FROM_PHYS] = str(record.phys_offset)
    wire = SendMessage(topic=topic, queue=queue_id, body=record.body, keys=tuple(record.keys), props=props,
                       flag=record.flag, born_ms=record.born_ms, born_host=(record.born_host.ip, record.born_host.port),
                       reconsume_times=record.reconsume_times, sys_flag=record.sys_flag & CLIENT_SYS_FLAGS,
                       tags=record.tags or None)
    return Copy(log_pos, record.phys_offset, wire)


def copies_since(commitlog: CommitLog, from_phys: int) -> set[int]:
    """The ``TIMER_FROM_PHYS_OFFSET`` of every copy stored from commitlog offset ``from_phys`` on."""
    commitlog.queue.refresh()
    found: set[int] = set()
    for _, decoded in commitlog.scan(from_phys, check_crc=False, read_body=False):
        record = decoded.record
        if decoded.kind is DecodeKind.RECORD and record is not None:
            origin = record.properties.get(PROP_TIMER_FROM_PHYS)
            if origin is not None and origin.isdigit():
                found.add(int(origin))
    return found


class RePutter:
    """Sends a batch and waits for its answer: ``put`` says which copies are done."""

    def __init__(self, ctx: zmq.Context[Any], ingress: str, stopping: Callable[[], bool]) -> None:
        self.socket = connect(ctx, zmq.DEALER, ingress)
        self._ids = itertools.count(1)
        self._stopping = stopping
        self._stored_phys = -1     # the last copy the writer stored: every later send is stored past it
        self.stored_end = 0        # past the first byte of every copy stored
        self._stored_at_ms = 0

    def lower_bound(self, now_ms: int) -> int | None:
        """A commitlog offset (a record's start) before anything sent from now on is stored: the last
        copy stored when it is recent (a read from it after a kill is short), else the writer's end."""
        if self._stored_phys >= 0 and now_ms - self._stored_at_ms < FRESH_MS:
            return self._stored_phys
        return self.written_end()

    def close(self) -> None:
        self.socket.close(linger=0)

    def _call(self, request: dict[str, Any], timeout_ms: int) -> dict[str, Any] | None:
        request_id = request["id"]
        try:
            self.socket.send(schema.pack(request), zmq.NOBLOCK)
        except zmq.Again:  # the writer away and its queue full: as good as no answer
            return None
        waited = 0
        while waited < timeout_ms:
            if not self.socket.poll(100):
                waited += 100
                if self._stopping():
                    return None  # found by name after the restart, like any batch left unanswered
                continue
            try:
                reply = schema.unpack(self.socket.recv())
            except schema.SchemaError as exc:
                log.warning("timer: ignoring a writer reply that does not decode: %s", exc)
                continue
            if reply.get("id") == request_id:
                return reply
        return None

    def written_end(self) -> int | None:
        """The writer's commitlog end: every copy sent after this answer is stored past it."""
        reply = self._call(Ping().encode(next(self._ids)), REPLY_TIMEOUT_MS)
        written = reply.get("written") if reply is not None and reply.get("ok") is True else None
        return written if isinstance(written, int) else None

    def put(self, copies: list[Copy]) -> list[bool] | None:
        """One ``send``: per copy, whether it is done (stored, or refused for good and dropped);
        None when no answer came in time."""
        reply = self._call(Send(tuple(c.wire for c in copies)).encode(next(self._ids)), REPLY_TIMEOUT_MS)
        if reply is None:
            return None
        results = reply.get("results") if reply.get("ok") is True else None
        if not isinstance(results, list) or len(results) != len(copies):
            log.warning("timer: the writer refused a re-put batch: %s", reply.get("reason") or reply)
            return [False] * len(copies)
        done = []
        for copy, result in zip(copies, results, strict=True):
            status = result.get("status") if isinstance(result, dict) else None
            if status in DROPPED:
                log.warning("timer: dropping the message at commitlog offset %d: %s (%s)", copy.phys_offset,
                            status, result.get("reason"))
            done.append(status in STORED or status in DROPPED)
            phys = result.get("phys_offset") if isinstance(result, dict) else None
            if status in STORED and isinstance(phys, int) and phys > self._stored_phys:
                self._stored_phys, self._stored_at_ms = phys, monotonic_ms()
                self.stored_end = max(self.stored_end, phys + 1)
        return done
