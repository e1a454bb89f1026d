"""The request contract: one ``Op`` for every op an actor serves, one frozen class per op (its
fields, their types and the wire's limits), and one decoder per actor, called once where a request
comes in (``decode_request``); the actors handle these classes, never a map.

| module       | ops                                                                             |
|--------------|---------------------------------------------------------------------------------|
| ``writer``   | send, send_encoded, encoding, topics, create_topic, delete_topic (and ping)     |
| ``reader``   | pull, query_key, query_keys, query_uniq, view_id, offset_by_time, queue_info,   |
|              | commit_offset, fetch_offset, groups, group_describe, delete_topic_offsets,      |
|              | group_activity, ack_stats (and ping), topic_stats, delete_group, ack_group_stats |
|              | pull_queues                                                                      |
| ``metadata`` | offset_table, merge_offsets, ack_marks, merge_ack_marks (the readers)           |
| ``acks``     | ack_pull, ack, nack, ack_release (served by the readers)                        |
|              | ack_pull_queues                                                                 |
| ``purge``    | purge_queues, persist_offsets (the readers)                                     |
| ``control``  | ping; status, stop (the supervisor); end_transaction, register_producer,         |
|              | resume_check (the transactions actor)                                           |

Each op needs a role of a CURVE client key that has roles (``OP_ROLES``, beside ``Op``: produce,
consume, admin, or none for ping, encoding and topics; ``request.role``).

A client sends ``request.frames(request_id)`` (or hands the request to ``Channel.call``); the bytes
are those the maps of ``schema.request`` gave before the classes, which a property test holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests.acks import Ack, AckPull, AckPullQueues, AckRelease, Nack
from mqstore.ipc.wire.requests.base import OP_ROLES, Op, Request, Role, UnknownOpError, at_most
from mqstore.ipc.wire.requests.control import EndTransaction, Ping, Promote, RegisterProducer, ResumeCheck, Status, Stop
from mqstore.ipc.wire.requests.metadata import AckMarks, MergeAckMarks, MergeOffsets, OffsetTable
from mqstore.ipc.wire.requests.purge import PersistOffsets, PurgeQueues
from mqstore.ipc.wire.requests.reader import (
    AckGroupStats,
    AckStats,
    CommitOffset,
    DeleteGroup,
    DeleteTopicOffsets,
    FetchOffset,
    GroupActivity,
    GroupDescribe,
    Groups,
    OffsetByTime,
    Pull,
    PullQueues,
    QueryKey,
    QueryKeys,
    QueryUniq,
    QueueInfo,
    TopicStats,
    ViewId,
    WatchQueues,
)
from mqstore.ipc.wire.requests.writer import (
    CreateTopic,
    DeleteTopic,
    Encoding,
    Send,
    SendEncoded,
    SendMessage,
    Topics,
)

__all__ = ["OP_ROLES", "READER", "SUPERVISOR", "TRANSACTIONS", "WRITER", "Ack",
           "AckGroupStats", "AckMarks", "AckPull", "AckPullQueues", "AckRelease",
           "AckStats", "CommitOffset", "CreateTopic", "DeleteGroup",
           "DeleteTopic", "DeleteTopicOffsets", "Encoding", "EndTransaction",
           "FetchOffset", "GroupActivity", "GroupDescribe", "Groups", "MergeAckMarks", "MergeOffsets", "Nack",
           "OffsetByTime", "OffsetTable", "Op", "PersistOffsets", "Ping", "Promote", "Pull", "PullQueues",
           "PurgeQueues", "QueryKey",
           "QueryKeys", "QueryUniq", "QueueInfo", "RegisterProducer", "Request", "ResumeCheck", "Role", "Send",
           "SendEncoded", "SendMessage", "Served", "Status", "Stop", "TopicStats", "Topics", "UnknownOpError", "ViewId",
           "WatchQueues", "at_most", "decode_request"]

@dataclass(frozen=True, slots=True)
class Served:
    """The ops one actor serves, by their wire string, and its name for an UNKNOWN_OP reply."""

    actor: str
    ops: dict[str, type[Request]]

    @classmethod
    def of(cls, actor: str, *classes: type[Request]) -> Served:
        return cls(actor, {c.OP.value: c for c in classes})


WRITER = Served.of("writer", Send, SendEncoded, Encoding, Ping, Topics, CreateTopic, DeleteTopic)
READER = Served.of("reader", Pull, QueryKey, QueryKeys, QueryUniq, ViewId, OffsetByTime, QueueInfo, CommitOffset,
                   FetchOffset, Ping, AckPull, Ack, Nack, AckRelease, Groups, GroupDescribe, DeleteTopicOffsets,
                   GroupActivity, AckStats, OffsetTable, MergeOffsets, AckMarks, MergeAckMarks,
                   PurgeQueues, PersistOffsets, WatchQueues,
                   TopicStats, DeleteGroup, AckGroupStats, PullQueues, AckPullQueues)
TRANSACTIONS = Served.of("transactions actor", EndTransaction, RegisterProducer, ResumeCheck, Ping)
SUPERVISOR = Served.of("supervisor", Status, Stop, Ping, Promote)


def decode_request(message: dict[str, Any], served: Served) -> Request:
    """The request of an unpacked map (``schema.unpack``), among the ops one actor ``served``
    (``WRITER``, ``READER``, ...): ``UnknownOpError`` for another op, ``schema.SchemaError`` naming
    the field for a map that is not that op's. Only ``send_encoded`` may carry frames after its map."""
    op = message.get("op")
    if type(op) is not str:
        op = schema.field(message, "op", str)  # the SchemaError that says what it is
    cls = served.ops.get(op)
    if cls is None:
        raise UnknownOpError(op, served.actor)
    if "parts" in message and cls is not SendEncoded:
        raise schema.SchemaError(f"{op!r} takes no frames after its map, got {len(message['parts'])}")
    return cls.decode(message)
