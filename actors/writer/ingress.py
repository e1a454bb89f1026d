"""What a producer's request on the writer's ingress becomes.

- ``send``: a map per message, parsed into messages and their queue ids (``MessageSend``): an
  explicit queue, a sharding key's queue, or the next queue round robin; a message refused before
  the append (a topic refused, a queue out of range) keeps its place as a refusal;
- ``send_encoded``: records the producer encoded, kept whole for the round's merge (``EncodedSend``,
  ``mqstore.actors.writer.encoded``); it is the one request that carries frames after its map;
- ``encoding``, ``ping``, ``topics``, ``create_topic``, ``delete_topic``: answered at once
  (``Answer``), as is any request that is not a valid map (BAD_REQUEST) or names another op
  (UNKNOWN_OP). A deletion also carries a ``TopicDeleted`` notice for the consume-queue builder,
  which removes the topic's queues (its records stay in the commitlog until retention, as in RocketMQ).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import Any

from mqstore.actors.config import BrokerConfig
from mqstore.actors.writer.encoded import EncodedSend, encoding_fields
from mqstore.actors.writer.sends import MessageSend
from mqstore.actors.writer.state import TopicQueues
from mqstore.engine.batch.record_batch import CLIENT_SYS_FLAGS
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.host import Host
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.log.record import SYSFLAG_TX_MASK, SYSFLAG_TX_ROLLBACK
from mqstore.engine.meta.topics import TopicError
from mqstore.engine.names import check_topic
from mqstore.engine.put.queue_selector import shard_hash, shard_queue
from mqstore.engine.put.rewrite import rewrite
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.encoded import OP_ENCODING, OP_SEND_ENCODED
from mqstore.ipc.wire.notices import TopicDeleted

OP_SEND = "send"
OP_TOPICS = "topics"
OP_CREATE_TOPIC = "create_topic"
OP_DELETE_TOPIC = "delete_topic"
OP_PING = "ping"


@dataclass(slots=True)
class Answer:
    """A request answered without an append: the reply goes out as soon as it is parsed."""

    identity: bytes
    reply: dict[str, Any]
    notice: TopicDeleted | None = None  # published on the dispatch stream once the reply is out


class Ingress:
    """Parses the requests of the writer's ingress; creates a topic on its first send."""

    def __init__(self, config: BrokerConfig, queues: TopicQueues, commitlog: CommitLog,
                 next_queue_offsets: dict[tuple[str, int], int]) -> None:
        self.config = config
        self.queues = queues
        self.commitlog = commitlog
        self.next_queue_offsets = next_queue_offsets  # the write path's: a deleted topic starts again at 0

    def parse(self, frames: list[bytes], parts: list[memoryview]) -> MessageSend | EncodedSend | Answer:
        """One request: its identity frame, its map, and (a send_encoded's only) the parts after it."""
        identity = frames[0]
        request_id: Any = None
        try:
            if len(frames) != 2:
                raise schema.SchemaError("expected a map frame after the identity")
            message = schema.unpack_message(frames[1], parts, max_bytes=self.config.broker.max_request_bytes)
            request_id = message.get("id")
            op = schema.field(message, "op", str)
            if parts and op != OP_SEND_ENCODED:
                raise schema.SchemaError(f"{op!r} takes no frames after its map, got {len(parts)}")
            if op == OP_SEND:
                return MessageSend(identity, request_id, *self._messages(message))
            if op == OP_SEND_ENCODED:
                return EncodedSend(identity, request_id, message)
            if op == OP_DELETE_TOPIC:
                return self._delete_topic(identity, message, request_id)
            return Answer(identity, self._admin(op, message, request_id))
        except schema.SchemaError as exc:
            return Answer(identity, schema.error_reply(request_id, schema.BAD_REQUEST, str(exc)))

    def _admin(self, op: str, message: dict[str, Any], request_id: Any) -> dict[str, Any]:
        broker = self.config.broker
        if op == OP_ENCODING:
            return schema.ok_reply(request_id, **encoding_fields(self.config.store))
        if op == OP_PING:
            return schema.ok_reply(request_id, pid=os.getpid(), written=self.commitlog.max_offset)
        if op == OP_TOPICS:
            topics = self.queues.table.topics.values()
            return schema.ok_reply(request_id, topics={t.name: t.queue_count for t in topics})
        if op == OP_CREATE_TOPIC:
            name = schema.field(message, "topic", str)
            queues = schema.field(message, "queues", int, default=broker.default_queues, lo=1, hi=broker.max_queues)
            try:
                topic = self.queues.table.create(name, queues)
                self.queues.table.flush()  # an explicit queue count is written before it is confirmed
            except TopicError as exc:
                return schema.error_reply(request_id, PutStatus.MESSAGE_ILLEGAL.value, str(exc))
            return schema.ok_reply(request_id, topic=topic.name, queues=topic.queue_count)
        return schema.error_reply(request_id, schema.UNKNOWN_OP, f"the writer does not serve {op!r}")

    def _delete_topic(self, identity: bytes, message: dict[str, Any], request_id: Any) -> Answer:
        """Forget the topic (its table entry and queue offsets) and tell the builder to remove its
        queues. Asked again for a topic already gone, the notice goes out again: a dropped one is
        made up for by asking twice."""
        name = schema.field(message, "topic", str)
        reason = check_topic(name)
        if reason is not None:
            return Answer(identity, schema.error_reply(request_id, PutStatus.MESSAGE_ILLEGAL.value, reason))
        try:
            existed = self.queues.table.delete(name)
        except OSError as exc:
            return Answer(identity, schema.error_reply(request_id, PutStatus.SERVICE_NOT_AVAILABLE.value,
                                                       f"cannot persist topics: {exc}"))
        for key in [k for k in self.next_queue_offsets if k[0] == name]:
            del self.next_queue_offsets[key]
        end = self.commitlog.max_offset
        return Answer(identity, schema.ok_reply(request_id, topic=name, existed=existed, phys_offset=end),
                      TopicDeleted(name, end))

    def _messages(self, message: dict[str, Any]
                  ) -> tuple[list[Message], list[int], list[PutResult | None], list[int]]:
        max_messages = self.config.broker.max_batch_messages
        raw_msgs = schema.field(message, "msgs", list)
        if not raw_msgs or len(raw_msgs) > max_messages:
            raise schema.SchemaError(f"a send carries 1 to {max_messages} messages")
        messages: list[Message] = []
        queue_ids: list[int] = []
        refused: list[PutResult | None] = []
        sent_queue_ids: list[int] = []
        for raw in raw_msgs:
            if not isinstance(raw, dict):
                raise schema.SchemaError("each message must be a map")
            msg = _message(raw)
            sent = self._queue_for(msg.topic, raw)
            stored = sent if isinstance(sent, PutResult) else rewrite(msg, sent, self.config.store)
            if isinstance(stored, PutResult):
                refused.append(stored)
                continue
            assert not isinstance(sent, PutResult)  # a refused queue is refused above
            if stored[0].topic != msg.topic:
                moved = self._system_queue(*stored)
                if moved is not None:
                    refused.append(moved)
                    continue
            msg, queue_id = stored
            sent_queue_ids.append(sent)
            messages.append(msg)
            queue_ids.append(queue_id)
            refused.append(None)
        return messages, queue_ids, refused, sent_queue_ids

    def _system_queue(self, message: Message, queue_id: int) -> PutResult | None:
        """A message a rule moved to a system topic: the topic is made with the queues it needs."""
        topic = self.queues.table.get(message.topic)
        if topic is not None and topic.queue_count > queue_id:
            return None
        try:
            self.queues.table.create(message.topic, queue_id + 1)
        except TopicError as exc:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=str(exc))
        except OSError as exc:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=f"cannot persist topics: {exc}")
        return None

    def _queue_for(self, topic: str, raw: dict[str, Any]) -> int | PutResult:
        """An explicit queue, a sharding key's queue, or the next queue round robin
        (``mqstore.engine.put.queue_selector``)."""
        try:
            queue_count = self.queues.queue_count(topic)
        except TopicError as exc:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=str(exc))
        except OSError as exc:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=f"cannot persist topics: {exc}")
        queue = schema.field(raw, "queue", int, default=None)
        if queue is not None:
            if not 0 <= queue < queue_count:
                return PutResult(PutStatus.MESSAGE_ILLEGAL,
                                 reason=f"queue id {queue} out of range: {topic} has {queue_count} queues")
            return int(queue)
        shard = schema.field(raw, "shard", str, default=None)
        if shard is not None:
            return shard_queue(shard_hash(shard), queue_count)
        return self.queues.round_robin.turn(topic, queue_count)


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
                   sys_flag=_client_sys_flag(raw),
                   prepared_tx_offset=schema.field(raw, "prepared_tx_offset", int, default=0, lo=0, hi=2**63 - 1))


def _client_sys_flag(raw: dict[str, Any]) -> int:
    """The sysFlag bits a client may set: its body is compressed, its tags are several, it is a
    transaction's half message (``mqstore.engine.put.transactions`` stores it as such) or its commit (the
    transaction actor's re-put). Rollback records are not served, and the host bits are the writer's."""
    sys_flag: int = schema.field(raw, "sys_flag", int, default=0, lo=0, hi=2**31 - 1)
    if sys_flag & ~(CLIENT_SYS_FLAGS | SYSFLAG_TX_MASK) or sys_flag & SYSFLAG_TX_MASK == SYSFLAG_TX_ROLLBACK:
        raise schema.SchemaError(f"sys_flag {sys_flag:#x} sets bits other than compressed / multi tags / "
                                 "transaction prepared or commit")
    return sys_flag
