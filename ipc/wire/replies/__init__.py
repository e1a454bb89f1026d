"""The reply contract: one frozen class per reply shape, the answers to the requests of
``mqstore.ipc.wire.requests``. An actor builds one and sends ``reply.encode(request_id)``; a client
decodes the map it got back with ``ReplyCls.decode(map)``, which raises ``ReplyError`` naming the
field. A refusal stays one map for every op (``schema.error_reply``).

| module       | replies                                                                          |
|--------------|----------------------------------------------------------------------------------|
| ``writer``   | send, send_encoded, encoding, ping, topics, create_topic, delete_topic           |
| ``acks``     | ack_pull, ack / nack, ack_release, ack_stats (served by the readers)             |
| ``control``  | ping, status, stop (the supervisor); end_transaction, register_producer,         |
|              | resume_check (the transactions actor)                                            |
| ``reader``   | pull (maps or packed), query_key / query_keys / query_uniq / view_id, offsets,   |
|              | queue_info, groups, group_describe, group_activity, ping (the readers),          |
|              | topic_stats, delete_group, pull_queues                                           |
| ``metadata`` | offset_table, merge_offsets, ack_marks, merge_ack_marks (the readers)            |
| ``purge``    | purge_queues, persist_offsets (the readers)                                      |

The bytes are those the maps of ``schema.ok_reply`` gave before the classes, which a property test holds.
"""

from __future__ import annotations

from mqstore.ipc.wire.replies.acks import AckPullReply, AckQueueStats, AckStatsReply, ReleaseReply, SettleReply
from mqstore.ipc.wire.replies.base import Reply, ReplyError
from mqstore.ipc.wire.replies.control import (
    EndTransactionReply,
    PingReply,
    PromoteReply,
    RegisterProducerReply,
    ResumeCheckReply,
    StatusReply,
    StopReply,
)
from mqstore.ipc.wire.replies.metadata import (
    AckMarksReply,
    MergeAckMarksReply,
    MergeOffsetsReply,
    OffsetTableReply,
)
from mqstore.ipc.wire.replies.purge import PersistOffsetsReply, PurgedQueue, PurgeQueuesReply
from mqstore.ipc.wire.replies.reader import (
    DeleteGroupReply,
    DeleteTopicOffsetsReply,
    GroupActivityReply,
    GroupDescribeReply,
    GroupsReply,
    MessagesReply,
    OffsetReply,
    PackedPullReply,
    PackedRecordsReply,
    PulledQueue,
    PullQueuesReply,
    PullReply,
    QueueInfoReply,
    ReaderPingReply,
    TopicStatsReply,
)
from mqstore.ipc.wire.replies.writer import (
    CreateTopicReply,
    DeleteTopicReply,
    EncodingReply,
    SendEncodedReply,
    SendReply,
    TopicsReply,
    WriterPingReply,
)

__all__ = ["AckMarksReply", "AckPullReply", "AckQueueStats", "AckStatsReply", "CreateTopicReply",
           "DeleteGroupReply", "DeleteTopicOffsetsReply", "DeleteTopicReply",
           "EncodingReply", "EndTransactionReply", "GroupActivityReply",
           "GroupDescribeReply", "GroupsReply", "MergeAckMarksReply", "MergeOffsetsReply", "MessagesReply",
           "OffsetReply", "OffsetTableReply", "PackedPullReply", "PackedRecordsReply", "PersistOffsetsReply",
           "PingReply", "PromoteReply", "PullQueuesReply", "PullReply", "PulledQueue",
           "PurgeQueuesReply", "PurgedQueue", "QueueInfoReply",
           "ReaderPingReply", "RegisterProducerReply", "ReleaseReply", "Reply", "ReplyError", "ResumeCheckReply",
           "SendEncodedReply", "SendReply", "SettleReply", "StatusReply", "StopReply", "TopicStatsReply",
           "TopicsReply", "WriterPingReply"]
