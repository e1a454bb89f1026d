"""What a producer's request on the writer's ingress becomes.

- ``send``: a map per message, parsed into messages and their queue ids (``MessageSend``): an
  explicit queue, a sharding key's queue, or the next queue round robin; a message refused before
  the append (a topic refused, a queue out of range) keeps its place as a refusal;
- ``send_encoded``: records the producer encoded, kept whole for the round's merge (``EncodedSend``,
  ``mqstore.actors.writer.encoded``); it is the one request that carries frames after its map;
- ``encoding``, ``ping``, ``topics``, ``create_topic``, ``delete_topic``: answered at once
  (``Answer``), as is any request that is not a valid map (BAD_REQUEST) or names another op
  (UNKNOWN_OP).

Each request is decoded once, here, into its class (``mqstore.ipc.wire.requests``); the round works on
those. The limits that depend on the configuration (messages in a send, queues of a topic) are
checked here, by the field's name. A deletion also carries a ``TopicDeleted`` notice for the consume-queue builder,
  which removes the topic's queues (its records stay in the commitlog until retention, as in RocketMQ).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from mqstore.actors.config import BrokerConfig
from mqstore.actors.writer.encoded import EncodedSend, encoding_reply
from mqstore.actors.writer.outlets import OWN_PEER
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
from mqstore.engine.put.system_topics import NOT_ALLOWED_SEND_TOPICS
from mqstore.ipc.transport.roles import KeyRoles
from mqstore.ipc.wire import requests, schema
from mqstore.ipc.wire.notices import TopicDeleted
from mqstore.ipc.wire.replies import CreateTopicReply, DeleteTopicReply, TopicsReply, WriterPingReply
from mqstore.ipc.wire.requests import (
    WRITER,
    CreateTopic,
    DeleteTopic,
    Encoding,
    Ping,
    Request,
    Send,
    SendEncoded,
    SendMessage,
    Topics,
    UnknownOpError,
)


@dataclass(slots=True)
class Answer:
    """A request answered without an append: the reply goes out as soon as it is parsed."""

    identity: bytes
    reply: dict[str, Any]
    notice: TopicDeleted | None = None  # published on the dispatch stream once the reply is out


class Ingress:
    """Decodes the requests of the writer's ingress; creates a topic on its first send."""

    def __init__(self, config: BrokerConfig, queues: TopicQueues, commitlog: CommitLog,
                 next_queue_offsets: dict[tuple[str, int], int], roles: KeyRoles | None = None) -> None:
        self.config = config
        self.roles = roles  # the CURVE client keys' roles; None: no CURVE, none apply
        self.queues = queues
        self.commitlog = commitlog
        self.next_queue_offsets = next_queue_offsets  # the write path's: a deleted topic starts again at 0

    def parse(self, frames: list[bytes], parts: list[memoryview], *, own: bool = False,
              user_id: str | None = None) -> MessageSend | EncodedSend | Answer:
        """One request: its identity frame, its map, and (a send_encoded's only) the parts after it;
        ``own``: it came from one of the broker's own actors (``own_ingress``), which may name system
        topics; ``user_id``: the CURVE key that sent it, where roles are in force (``roles``)."""
        identity = OWN_PEER + frames[0] if own else frames[0]
        request_id: Any = None
        try:
            if len(frames) != 2:
                raise schema.SchemaError("expected a map frame after the identity")
            message = schema.unpack_message(frames[1], parts, max_bytes=self.config.broker.max_request_bytes)
            request_id = message.get("id")
            request = requests.decode_request(message, WRITER)
        except UnknownOpError as exc:
            return Answer(identity, schema.error_reply(request_id, schema.UNKNOWN_OP, str(exc)))
        except schema.SchemaError as exc:
            return Answer(identity, schema.error_reply(request_id, schema.BAD_REQUEST, str(exc)))
        return self.handle(identity, request_id, request, own=own, user_id=user_id)

    def handle(self, identity: bytes, request_id: Any, request: Request, *, own: bool = False,
               user_id: str | None = None) -> MessageSend | EncodedSend | Answer:
        """A decoded request: a send for the round, or its answer."""
        refusal = None if own else _client_refusal(request)
        if refusal is None and not own and self.roles is not None:
            refusal = self.roles.refusal(user_id, request)
        if refusal is not None:
            return Answer(identity, schema.error_reply(request_id, schema.NO_PERMISSION, refusal))
        try:
            if isinstance(request, Send):
                return MessageSend(identity, request_id, *self._messages(request))
            if isinstance(request, SendEncoded):
                return EncodedSend(identity, request_id, request)
            if isinstance(request, DeleteTopic):
                return self._delete_topic(identity, request, request_id)
            return Answer(identity, self._admin(request, request_id))
        except schema.SchemaError as exc:
            return Answer(identity, schema.error_reply(request_id, schema.BAD_REQUEST, str(exc)))

    def _admin(self, request: Request, request_id: Any) -> dict[str, Any]:
        broker = self.config.broker
        if isinstance(request, Encoding):
            return encoding_reply(self.config.store, broker.max_request_bytes).encode(request_id)
        if isinstance(request, Ping):
            return WriterPingReply(os.getpid(), self.commitlog.max_offset).encode(request_id)
        if isinstance(request, Topics):
            topics = self.queues.table.topics.values()
            return TopicsReply({t.name: t.queue_count for t in topics}).encode(request_id)
        assert isinstance(request, CreateTopic), request
        requests.at_most("queues", request.queues, broker.max_queues)
        queues = broker.default_queues if request.queues is None else request.queues
        try:
            topic = self.queues.table.create(request.topic, queues)
            self.queues.table.flush()  # an explicit queue count is written before it is confirmed
        except TopicError as exc:
            return schema.error_reply(request_id, PutStatus.MESSAGE_ILLEGAL.value, str(exc))
        return CreateTopicReply(topic.name, topic.queue_count).encode(request_id)

    def _delete_topic(self, identity: bytes, request: DeleteTopic, request_id: Any) -> Answer:
        """Forget the topic (its table entry and queue offsets) and tell the builder to remove its
        queues. Asked again for a topic already gone, the notice goes out again: a dropped one is
        made up for by asking twice."""
        name = request.topic
        reason = check_topic(name)
        if reason is not None:
            return Answer(identity, schema.error_reply(request_id, PutStatus.MESSAGE_ILLEGAL.value, reason))
        end = self.commitlog.max_offset  # the topic's records so far: below it, and kept with the deletion
        try:
            existed = self.queues.table.delete(name, end)
        except OSError as exc:
            return Answer(identity, schema.error_reply(request_id, PutStatus.SERVICE_NOT_AVAILABLE.value,
                                                       f"cannot persist topics: {exc}"))
        for key in [k for k in self.next_queue_offsets if k[0] == name]:
            del self.next_queue_offsets[key]
        return Answer(identity, DeleteTopicReply(name, existed, end).encode(request_id),
                      TopicDeleted(name, end))

    def _messages(self, request: Send) -> tuple[list[Message], list[int], list[PutResult | None], list[int]]:
        max_messages = self.config.broker.max_batch_messages
        if len(request.msgs) > max_messages:
            raise schema.SchemaError(f"a send carries 1 to {max_messages} messages")
        messages: list[Message] = []
        queue_ids: list[int] = []
        refused: list[PutResult | None] = []
        sent_queue_ids: list[int] = []
        for sent_message in request.msgs:
            msg = _message(sent_message)
            sent = self._queue_for(msg.topic, sent_message)
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

    def _queue_for(self, topic: str, sent: SendMessage) -> int | PutResult:
        """An explicit queue, a sharding key's queue, or the next queue round robin
        (``mqstore.engine.put.queue_selector``)."""
        try:
            queue_count = self.queues.queue_count(topic)
        except TopicError as exc:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=str(exc))
        except OSError as exc:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=f"cannot persist topics: {exc}")
        queue = sent.queue
        if queue is not None:
            if not 0 <= queue < queue_count:
                return PutResult(PutStatus.MESSAGE_ILLEGAL,
                                 reason=f"queue id {queue} out of range: {topic} has {queue_count} queues")
            return int(queue)
        shard = sent.shard
        if shard is not None:
            return shard_queue(shard_hash(shard), queue_count)
        return self.queues.round_robin.turn(topic, queue_count)


def _client_refusal(request: Request) -> str | None:
    """Why a client may not make this request: it names a topic only the broker writes (RocketMQ's
    NO_PERMISSION answer, the whole request refused as the remoting front refuses it)."""
    if isinstance(request, Send):
        named: tuple[str, ...] | list[str] = tuple(m.topic for m in request.msgs)
    elif isinstance(request, SendEncoded):
        named = request.topics
    elif isinstance(request, CreateTopic | DeleteTopic):
        named = (request.topic,)
    else:
        return None
    return next((r for r in map(NOT_ALLOWED_SEND_TOPICS.refusal, named) if r is not None), None)


def _message(sent: SendMessage) -> Message:
    host = sent.born_host
    return Message(topic=sent.topic, body=sent.body, tags=sent.tags, keys=sent.keys or (),
                   properties=sent.props if sent.props is not None else {}, flag=sent.flag or 0,
                   born_ms=sent.born_ms, born_host=Host(host[0], host[1]) if host is not None else None,
                   reconsume_times=sent.reconsume_times or 0, sys_flag=_client_sys_flag(sent.sys_flag or 0),
                   prepared_tx_offset=sent.prepared_tx_offset or 0)


def _client_sys_flag(sys_flag: int) -> int:
    """The sysFlag bits a client may set: its body is compressed, its tags are several, it is a
    transaction's half message (``mqstore.engine.put.transactions`` stores it as such) or its commit (the
    transaction actor's re-put). Rollback records are not served, and the host bits are the writer's."""
    if sys_flag & ~(CLIENT_SYS_FLAGS | SYSFLAG_TX_MASK) or sys_flag & SYSFLAG_TX_MASK == SYSFLAG_TX_ROLLBACK:
        raise schema.SchemaError(f"sys_flag {sys_flag:#x} sets bits other than compressed / multi tags / "
                                 "transaction prepared or commit")
    return sys_flag
