"""The transaction actor's view of the broker: what it asks the writer and reader 0, over ipc.

The actor is a client of the store like any other: it reads half and op messages with pulls and
``view_id`` (the stored bytes, decoded here: a compressed body stays as stored), keeps its progress
as consumer offsets of ``CID_RMQ_SYS_TRANS`` (reader 0 owns ``consumerOffset.json``), and puts
commits, op records, re-appended halves and discards through the writer's ingress as sends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import wait
from typing import Any

from mqstore.engine.log.host import Host
from mqstore.engine.log.msgid import offset_msg_id
from mqstore.engine.log.record import PROP_CRC_KEY, PROP_KEYS, PROP_TAGS, Record
from mqstore.engine.put import transactions as tx
from mqstore.ipc.remoting import codec as remoting
from mqstore.ipc.transport.channel import BrokerTimeoutError, Channel
from mqstore.ipc.wire import replies, requests
from mqstore.ipc.wire.messages import Outgoing, SendResult

CALL_TIMEOUT_MS = 5_000
STOP_CHECK_S = 0.1  # while a call waits, how often it looks whether the actor stops
PULL_BATCH = 32  # RocketMQ's checker pulls 32 at a time


class BrokerCalls:
    """``stopping``: once it is true, a call waiting for its reply gives up (BrokerTimeoutError), as a
    call to a peer that is gone would at its timeout: an actor whose supervisor died stops with every
    peer at once, and a reader already gone never answers."""

    def __init__(self, channel: Channel, store_host: Host, group: str,
                 stopping: Callable[[], bool] = lambda: False) -> None:
        self.channel = channel
        self.store_host = store_host
        self.group = group
        self._stopping = stopping
        self._made: set[str] = set()  # system topics made by this process (with one queue, as RocketMQ's)

    def _call(self, route: str, request: requests.Request) -> dict[str, Any]:
        future = self.channel.call(route, request, timeout_ms=CALL_TIMEOUT_MS)
        while not wait([future], STOP_CHECK_S).done:
            if self._stopping():
                future.cancel()
                raise BrokerTimeoutError(f"stopping: no longer waiting for the reply to {type(request).__name__}")
        return future.result()

    def record_at(self, phys_offset: int) -> Record | None:
        """The record at a commitlog offset, as stored; None when the readers do not have it (yet)."""
        reply = replies.PackedRecordsReply.decode(
            self._call("reader", requests.ViewId(offset_msg_id(self.store_host, phys_offset), raw=True)))
        return remoting.decode_records(bytes(reply.records))[0] if reply.record_count else None

    def span(self, topic: str, queue_id: int = 0) -> tuple[int, int]:
        queues = replies.QueueInfoReply.decode(self._call("reader", requests.QueueInfo(topic))).queues
        return queues.get(queue_id, (0, 0))

    def pull(self, topic: str, queue_offset: int, count: int = PULL_BATCH) -> list[Record]:
        """Up to ``count`` records of the topic's queue 0 from ``queue_offset``, as stored."""
        reply = replies.PackedPullReply.decode(self._call(
            "reader", requests.Pull(self.group, topic, 0, queue_offset, count, tags="*", wait_ms=0, raw=True)))
        return remoting.decode_records(bytes(reply.records)) if reply.record_count else []

    def offset(self, topic: str) -> int:
        return replies.OffsetReply.decode(self._call("reader", requests.FetchOffset(self.group, topic, 0))).offset

    def commit_offset(self, topic: str, queue_offset: int) -> None:
        self._call("reader", requests.CommitOffset(self.group, topic, 0, queue_offset))

    def send(self, messages: Sequence[Outgoing]) -> list[SendResult]:
        """Sends to a system topic make it first, with its one queue (a send would make it with the
        writer's default); the half topic is the writer's to make (``mqstore.engine.put.rewrite``)."""
        for topic in {m.topic for m in messages if m.topic in (tx.OP_TOPIC, tx.CHECK_MAX_TOPIC)} - self._made:
            self._call("ingress", requests.CreateTopic(topic, 1))
            self._made.add(topic)
        reply = self._call("ingress", requests.Send(tuple(map(requests.SendMessage.of, messages))))
        return [SendResult.from_wire(r) for r in reply["results"]]


def own_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """A stored record's properties less those a send gives as fields (tags, keys) or the writer adds."""
    return {k: v for k, v in properties.items() if k not in (PROP_TAGS, PROP_KEYS, PROP_CRC_KEY)}


def resend(record: Record, **changes: Any) -> Outgoing:
    """A stored record as a send: its body as stored (with its compressed bit), its labels, its
    born time and host; ``changes`` override fields of the ``Outgoing``."""
    fields: dict[str, Any] = {"topic": record.topic, "body": record.body, "tags": record.tags,
                              "keys": tuple(record.keys), "properties": own_properties(record.properties),
                              "flag": record.flag,
                              "born_ms": record.born_ms, "born_host": (record.born_host.ip, record.born_host.port),
                              "reconsume_times": record.reconsume_times, "sys_flag": record.sys_flag & 0xF}
    fields.update(changes)
    return Outgoing(**fields)
