"""The readers' part of the operator's commands beyond offsets (``mqstore topics describe``,
``mqstore groups delete | describe``):

    topic_stats      per queue of a topic: its published [min, max) and the bytes of its messages'
                     records, summed from the consume-queue entries' sizes (exact, without reading
                     the commitlog)
    delete_group     a group's committed offsets (reader 0, written at once) and the ack-mode queue
                     indexes this reader owns, removed durably; refused (``NON_EMPTY_GROUP``, Kafka's
                     word) while one of its consumers was served here within ``live_ms`` or waits in
                     an ack-mode pull
    ack_group_stats  an ack-mode group's queues this reader owns, with their counts (``ack_stats``'
                     for each): a queue not open is opened for the count and closed again, so a
                     look never takes a place of ``[broker] ack_max_queues``
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mqstore.actors.clock import wall_ms
from mqstore.actors.reader.ack_groups import AckGroups
from mqstore.actors.reader.activity import GroupActivity
from mqstore.actors.reader.offsets import CommittedOffsets
from mqstore.actors.reader.state import PublishedStore
from mqstore.engine.ackindex.deletion import remove_empty_group_dirs
from mqstore.engine.consumequeue.entry import message_bytes
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.replies import AckQueueStats, AckStatsReply, DeleteGroupReply, TopicStatsReply
from mqstore.ipc.wire.requests import AckGroupStats, DeleteGroup, Request, TopicStats

NON_EMPTY_GROUP = "NON_EMPTY_GROUP"
READ_ENTRIES = 300_000  # consume-queue entries summed at a time (one file's worth at RocketMQ's size)


class Administration:
    def __init__(self, offsets: CommittedOffsets, acks: AckGroups, activity: GroupActivity,
                 wall_ms: Callable[[], int] = wall_ms) -> None:
        self.store: PublishedStore = offsets.store  # the reader's published view, which every part shares
        self.offsets = offsets
        self.acks = acks
        self.activity = activity
        self.wall_ms = wall_ms

    def ops(self) -> dict[type[Request], Callable[[bytes, Any, Any], dict[str, Any] | None]]:
        """The reader's dispatch entries for these ops."""
        return {TopicStats: self.op_topic_stats, DeleteGroup: self.op_delete_group,
                AckGroupStats: self.op_ack_group_stats}

    def op_topic_stats(self, identity: bytes, request_id: Any, request: TopicStats) -> dict[str, Any]:
        queues: dict[int, tuple[int, int, int]] = {}
        for queue_id, (lo, hi) in self.store.queue_info(request.topic).items():
            view = self.store.published_queue(request.topic, queue_id)
            total, at = 0, lo
            while view is not None and at < hi:
                entries = view.read(at, READ_ENTRIES)
                if len(entries) == 0:
                    break
                total += message_bytes(entries)
                at += len(entries)
            queues[queue_id] = (lo, hi, total)
        return TopicStatsReply(queues).encode(request_id)

    def op_delete_group(self, identity: bytes, request_id: Any, request: DeleteGroup) -> dict[str, Any]:
        group = request.group
        seen_ms = self.activity.last_seen_ms.get(group)
        waiting = [key for key in self.acks.parked.waited_on() if key[0] == group]
        if waiting or (seen_ms is not None and self.wall_ms() - seen_ms < request.live_ms):
            why = "a consumer waits in an ack-mode pull" if waiting else \
                f"a consumer was served {self.wall_ms() - (seen_ms or 0)} ms ago"
            return schema.error_reply(request_id, NON_EMPTY_GROUP, f"group {group!r} has live consumers ({why}, "
                                      f"within {request.live_ms} ms): stop them first")
        topics = self.offsets.delete_group(group)
        removed = []
        for key in self.acks.queues.owned_on_disk():
            if key[0] == group:
                self.acks.scan_filters.pop(key, None)
                if self.acks.queues.delete(key):
                    removed.append((key[1], key[2]))
        remove_empty_group_dirs(self.store.store_dir, group)
        self.activity.last_seen_ms.pop(group, None)
        return DeleteGroupReply(tuple(topics), tuple(removed)).encode(request_id)

    def op_ack_group_stats(self, identity: bytes, request_id: Any, request: AckGroupStats) -> dict[str, Any]:
        queues = self.acks.queues
        stats = []
        for key in queues.owned_on_disk():
            if key[0] != request.group:
                continue
            was_open = queues.opened(key) is not None
            q = queues.get(key, create=False)
            if q is None:
                continue
            view = self.store.published_queue(key[1], key[2])
            stats.append(AckQueueStats(key[0], key[1], key[2], **q.counts(view.max_queue_offset if view else 0)))
            if not was_open:
                queues.close_one(key)
        return AckStatsReply(tuple(stats)).encode(request_id)
