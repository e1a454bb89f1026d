"""Consumer offsets as the readers serve them: ``commit_offset`` and ``fetch_offset`` over RocketMQ's
``config/consumerOffset.json`` (``mqstore.engine.meta.offsets.ConsumerOffsets``), which reader
``OFFSET_OWNER_INDEX`` alone holds; any other reader answers ``NOT_OWNER``. The table is written
every ``offset_persist_interval_ms`` when it changed, and at stop.

The administration of groups reads and changes the same table: ``groups`` (group -> topics),
``group_describe`` (per queue committed offset, max offset, lag and last consume time, computed by
``mqstore.engine.read.group_lag``) and ``delete_topic_offsets`` (a deleted topic's offsets go with it). A reset
is ``commit_offset`` per queue, which may move an offset back.

A slave keeps the table in step with its master's (``mqstore.actors.metasync``): the master's front
reads it whole (``offset_table``), and the slave takes it in with ``merge_offsets``, where an offset
only moves forward (a master's older table never takes a group back over what it consumed) and no
further than the queue's end on the slave (its log may be behind the master's; the rest comes at a
later sync), so a promoted slave resumes each group where its master last said, or a little before.
A group deleted on the master (``delete_group``) is numbered in ``config/deletedGroups.json``
(``mqstore.engine.meta.deleted_groups``), which ``offset_table`` sends along; ``merge_offsets`` first
deletes here each group whose deletion is newer than the one this broker last took, then merges.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.actors.reader.state import PublishedStore
from mqstore.engine.meta.deleted_groups import DELETED_GROUPS_FILE, DeletedGroups
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, TOPIC_GROUP_SEPARATOR, ConsumerOffsets
from mqstore.engine.read.group_lag import group_lags, groups_in
from mqstore.engine.read.lookup import GetStatus
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.replies import (
    DeleteTopicOffsetsReply,
    GroupDescribeReply,
    GroupsReply,
    MergeOffsetsReply,
    OffsetReply,
    OffsetTableReply,
)
from mqstore.ipc.wire.requests import (
    CommitOffset,
    DeleteTopicOffsets,
    FetchOffset,
    GroupDescribe,
    Groups,
    MergeOffsets,
    OffsetTable,
)

log = logging.getLogger("mqstore")

NOT_OWNER = "NOT_OWNER"
OFFSET_OWNER_INDEX = 0


class CommittedOffsets:
    def __init__(self, store_dir: Path, reader_index: int, store: PublishedStore, now_ms: Callable[[], int]) -> None:
        self.path = store_dir / CONSUMER_OFFSET_FILE
        self.reader_index = reader_index
        self.store = store
        self.table: ConsumerOffsets | None = None
        self.deleted_path = store_dir / DELETED_GROUPS_FILE
        self.deleted = DeletedGroups()
        if reader_index == OFFSET_OWNER_INDEX:
            self.table = ConsumerOffsets.load(self.path, now_ms)
            self.deleted = DeletedGroups.load(self.deleted_path)
        self.dirty = False
        self.commits = 0  # offsets committed or merged since start: tells the metrics a group's lag moved

    def op_commit_offset(self, identity: bytes, request_id: Any, request: CommitOffset) -> dict[str, Any]:
        if self.table is None:
            return self._not_owner(request_id)
        group, topic, queue_id, next_offset = request.group, request.topic, request.queue_id, request.queue_offset
        max_queue_offset = self._max_queue_offset(topic, queue_id)
        if next_offset > max_queue_offset:
            self.store.recheck(topic, queue_id)  # the reader may not have heard of the newest entries
            max_queue_offset = self._max_queue_offset(topic, queue_id)
        if next_offset > max_queue_offset:
            return schema.error_reply(request_id, GetStatus.OFFSET_OVERFLOW_BADLY.value,
                                      f"offset {next_offset} is beyond {topic}/{queue_id}'s max offset "
                                      f"{max_queue_offset}")
        self.table.commit(group, topic, queue_id, next_offset)
        self.dirty = True
        self.commits += 1
        return OffsetReply(next_offset).encode(request_id)

    def op_fetch_offset(self, identity: bytes, request_id: Any, request: FetchOffset) -> dict[str, Any]:
        if self.table is None:
            return self._not_owner(request_id)
        offset = self.table.query(request.group, request.topic, request.queue_id)
        return OffsetReply(offset).encode(request_id)

    def op_offset_table(self, identity: bytes, request_id: Any, request: OffsetTable) -> dict[str, Any]:
        if self.table is None:
            return self._not_owner(request_id)
        entries: list[tuple[str, str, int, int]] = []
        for key, queues in self.table.table.items():
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            entries.extend((topic, group, queue_id, next_offset) for queue_id, next_offset in queues.items())
        return OffsetTableReply(tuple(entries), self.table.counter, tuple(self.deleted.deleted.items())
                                ).encode(request_id)

    def op_merge_offsets(self, identity: bytes, request_id: Any, request: MergeOffsets) -> dict[str, Any]:
        if self.table is None:
            return self._not_owner(request_id)
        groups_deleted = self._merge_deletions(request.deleted)
        moved, clamped = 0, []
        for topic, group, queue_id, next_offset in request.entries:
            current = self.table.query(group, topic, queue_id)
            if next_offset <= current:
                continue  # never back: the master's table may be older than what this one holds
            end = self._max_queue_offset(topic, queue_id)
            if next_offset > end:
                self.store.recheck(topic, queue_id)
                end = self._max_queue_offset(topic, queue_id)
            if next_offset > end:
                clamped.append((topic, group, queue_id, end))
                next_offset = end
                if next_offset <= current:
                    continue
            try:
                self.table.commit(group, topic, queue_id, next_offset)
            except ValueError as exc:
                log.warning("merge_offsets: %s@%s/%d not taken: %s", group, topic, queue_id, exc)
                continue
            moved += 1
        self.dirty |= moved > 0
        self.commits += moved
        return MergeOffsetsReply(moved, tuple(clamped), groups_deleted).encode(request_id)

    def _merge_deletions(self, deletions: tuple[tuple[str, int], ...]) -> int:
        """The master's group deletions this broker has not taken: their offsets go, the offsets file
        written before the deletions are recorded (a crash in between deletes them again); how many."""
        assert self.table is not None
        newer = [(group, number) for group, number in deletions if self.deleted.newer(group, number)]
        if not newer:
            return 0
        gone = [group for group, _ in newer if self.table.delete_group(group)]
        if gone:
            self.table.persist(self.path)
            self.commits += 1
        for group, number in newer:
            self.deleted.take(group, number)
        self.deleted.persist(self.deleted_path)
        return len(gone)

    def op_groups(self, identity: bytes, request_id: Any, request: Groups) -> dict[str, Any]:
        if self.table is None:
            return self._not_owner(request_id)
        return GroupsReply(groups_in(self.table.table)).encode(request_id)

    def op_group_describe(self, identity: bytes, request_id: Any, request: GroupDescribe) -> dict[str, Any]:
        if self.table is None:
            return self._not_owner(request_id)
        topics = self.table.topics_of(request.group)
        lags = group_lags(request.group, topics, self.table.table, self.store.queue_info, self._store_ms_at)
        return GroupDescribeReply(request.group, tuple(lags)).encode(request_id)

    def op_delete_topic_offsets(self, identity: bytes, request_id: Any, request: DeleteTopicOffsets
                                ) -> dict[str, Any]:
        if self.table is None:
            return self._not_owner(request_id)
        deleted = self.table.delete_topic(request.topic)
        self.dirty |= deleted
        return DeleteTopicOffsetsReply(deleted).encode(request_id)

    def delete_group(self, group: str) -> list[str]:
        """Forget ``group``'s committed offsets, durably before this returns (a deleted group must not
        come back after a crash); the topics it had offsets on. [] on a reader that does not own them."""
        if self.table is None:
            return []
        topics = self.table.delete_group(group)
        if topics:
            # numbered first: a crash before the offsets are written leaves the group on both sides
            self.deleted.record(group)
            self.deleted.persist(self.deleted_path)
            self.table.persist(self.path)  # an OSError reaches the client: the group is not deleted
            self.commits += 1
        return topics

    def _store_ms_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        view = self.store.published_queue(topic, queue_id)
        entries = view.read(queue_offset, 1) if view is not None else None
        if entries is None or len(entries) == 0:
            return -1
        return self.store.commitlog.store_ms_at(int(entries["phys_offset"][0]))

    def persist(self, *, final: bool) -> None:
        """Write the table if it changed. ``final`` (at stop): a failure raises; before that it is
        logged and the next call tries again."""
        if self.table is None or not self.dirty:
            return
        try:
            self.table.persist(self.path)
        except OSError:
            if final:
                raise  # the last chance: the process exits non-zero and the log says why
            # write_atomic leaves the previous file intact and writes a whole new one next time, so a
            # failed write (a full disk) loses nothing but the delay: keep the table dirty, retry
            log.exception("cannot persist consumer offsets; retrying")
            return
        self.dirty = False

    def _max_queue_offset(self, topic: str, queue_id: int) -> int:
        view = self.store.published_queue(topic, queue_id)
        return view.max_queue_offset if view is not None else 0

    def _not_owner(self, request_id: Any) -> dict[str, Any]:
        return schema.error_reply(request_id, NOT_OWNER, f"consumer offsets are served by reader "
                                                         f"{OFFSET_OWNER_INDEX}, not reader {self.reader_index}")
