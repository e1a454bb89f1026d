"""Purging queues (``mqstore queues purge``): every group's position on a topic's queues moves to
their end, as RabbitMQ's ``purge_queue`` empties a queue for its consumers; the records stay in the
commitlog until retention (queries still find them).

Reader 0 decides: each purged queue's end (after a look at its files) becomes its floor, written to
``config/purgedQueues.json`` (``mqstore.engine.meta.purges``), and every group's committed offset
below it moves there, the offsets file written before the reply. Every reader then, with those
floors: a pull below a queue's floor reads from the floor (a running consumer gets at most what it
had already pulled, or had a pull waiting for), a consumer's commit below it commits the floor (so
a consumer that had not pulled since cannot take its group back), and its ack-mode queues lose their
ready messages, fresh and due again alike, acked in the queue index and the journal fsynced before
the reply. As RabbitMQ's purge does, messages delivered and not acked stay with their consumers: an
ack settles them, a nack or a timeout makes them due again, and a nack without requeue (or too many
deliveries) dead-letters them. A floor above a queue's end (a topic deleted and made again) is not
applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from mqstore.actors.reader.ack_groups import AckGroups
from mqstore.actors.reader.ack_queue import Located
from mqstore.actors.reader.offsets import NOT_OWNER, CommittedOffsets
from mqstore.actors.reader.state import PublishedStore
from mqstore.engine.ackindex.low_water import queue_index_keys
from mqstore.engine.consumequeue.entry import entry_live
from mqstore.engine.meta.purges import PURGED_QUEUES_FILE, PurgedQueues
from mqstore.engine.read.group_lag import groups_in
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.replies.purge import ACK_MODE, OFFSET_MODE, PersistOffsetsReply, PurgedQueue, PurgeQueuesReply
from mqstore.ipc.wire.requests import CommitOffset, Pull, Request
from mqstore.ipc.wire.requests.purge import Floor, PersistOffsets, PurgeQueues

Op = Callable[[bytes, Any, Any], dict[str, Any] | None]
LAST_LIVE_SEARCH = 1024  # entries looked back from a floor for the message that marks a skipped backlog


class QueuePurges:
    def __init__(self, store: PublishedStore, offsets: CommittedOffsets, acks: AckGroups) -> None:
        self.store_dir = store.store_dir
        self.path = store.store_dir / PURGED_QUEUES_FILE
        self.store = store
        self.offsets = offsets
        self.acks = acks
        self.table = PurgedQueues.load(self.path)

    # -- the floors, on every pull and commit --------------------------------------------------------

    def floor(self, topic: str, queue_id: int) -> int:
        """The queue's floor where it applies: 0 when never purged, or when the queue is below it."""
        floor = self.table.floor(topic, queue_id)
        if floor == 0:
            return 0
        return floor if floor <= self._end(topic, queue_id, recheck=False) or floor <= self._end(topic, queue_id) else 0

    def pulls(self, op: Op) -> Op:
        """``op`` (the reader's pull) for a pull that starts at its queue's floor or above."""
        def pull(identity: bytes, request_id: Any, request: Pull) -> dict[str, Any] | None:
            floor = self.floor(request.topic, request.queue_id)
            return op(identity, request_id, replace(request, queue_offset=floor) if request.queue_offset < floor
                      else request)
        return pull

    def commits(self, op: Op) -> Op:
        """``op`` (``commit_offset``) for a consumer's commit at its queue's floor or above; a reset
        (``admin``) goes where it says."""
        def commit(identity: bytes, request_id: Any, request: CommitOffset) -> dict[str, Any] | None:
            floor = 0 if request.admin else self.floor(request.topic, request.queue_id)
            return op(identity, request_id, replace(request, queue_offset=floor) if request.queue_offset < floor
                      else request)
        return commit

    def ops(self) -> dict[type[Request], Op]:
        """The ops this serves, for the reader's table."""
        return {PurgeQueues: self.op_purge_queues, PersistOffsets: self.op_persist_offsets}

    # -- the ops -------------------------------------------------------------------------------------

    def op_purge_queues(self, identity: bytes, request_id: Any, request: PurgeQueues) -> dict[str, Any]:
        if request.floors is None:
            if self.offsets.table is None:
                return schema.error_reply(request_id, NOT_OWNER, "reader 0 purges first and names the floors")
            floors = self._ends(request.topic, request.queues)
            purged = self._move_offsets(request.topic, floors)
            if self.table.raise_floors(request.topic, floors):
                self.table.persist(self.path)
            self.offsets.persist(final=True)  # raises, so the reply says so, when the file cannot be written
        else:
            floors = list(request.floors)
            self.table.raise_floors(request.topic, floors)  # reader 0 wrote them; read again at a restart
            purged = []
        purged.extend(self._purge_ack_queues(request.topic, floors))
        return PurgeQueuesReply(tuple(floors), tuple(purged)).encode(request_id)

    def op_persist_offsets(self, identity: bytes, request_id: Any, request: PersistOffsets) -> dict[str, Any]:
        if self.offsets.table is None:
            return schema.error_reply(request_id, NOT_OWNER, "consumer offsets are served by reader 0")
        changed = self.offsets.dirty
        self.offsets.persist(final=True)
        return PersistOffsetsReply(changed).encode(request_id)

    # -- internals -----------------------------------------------------------------------------------

    def _end(self, topic: str, queue_id: int, *, recheck: bool = True) -> int:
        if recheck:
            self.store.recheck(topic, queue_id)  # the builder's newest entries, whether notices came or not
        view = self.store.published_queue(topic, queue_id)
        return view.max_queue_offset if view is not None else 0

    def _ends(self, topic: str, queues: tuple[int, ...] | None) -> list[Floor]:
        known = self.store.queue_info(topic)
        if not known:
            raise ValueError(f"topic {topic!r} has no queues")
        wanted = sorted(known) if queues is None else sorted(set(queues))
        missing = [q for q in wanted if q not in known]
        if missing:
            raise ValueError(f"topic {topic!r} has no queue {missing[0]} (it has {len(known)})")
        return [(q, self._end(topic, q)) for q in wanted]

    def _move_offsets(self, topic: str, floors: list[Floor]) -> list[PurgedQueue]:
        table = self.offsets.table
        assert table is not None
        groups = sorted(g for g, topics in groups_in(table.table).items() if topic in topics)
        purged = []
        for group in groups:
            for queue_id, floor in floors:
                committed = table.query(group, topic, queue_id)
                if committed < 0:
                    continue
                if committed < floor:
                    table.commit(group, topic, queue_id, floor)
                    self.offsets.dirty = True
                    self.offsets.commits += 1
                purged.append(PurgedQueue(group, queue_id, OFFSET_MODE, max(floor - committed, 0)))
        return purged

    def _purge_ack_queues(self, topic: str, floors: list[Floor]) -> list[PurgedQueue]:
        """The ready messages below each floor of every ack-mode group this reader owns on ``topic``
        (one that has an index for any queue of the topic gets one for each purged queue: a queue it
        never pulled would otherwise start at the queue's min)."""
        queues = self.acks.queues
        groups = sorted({group for group, t, _ in queue_index_keys(self.store_dir) if t == topic})
        out = []
        for group in groups:
            for queue_id, floor in floors:
                key = (group, topic, queue_id)
                if queues.owner(key) != queues.reader_index:
                    continue
                q = queues.get(key, create=True)
                assert q is not None
                last = self._last_live(topic, queue_id, floor)
                purged, kept = queues.guarded(key, partial(q.purge_below, floor, last))
                out.append(PurgedQueue(group, queue_id, ACK_MODE, purged, kept))
        return out

    def _last_live(self, topic: str, queue_id: int, floor: int) -> Located | None:
        """The last message below ``floor`` still in the commitlog (None: none among the last few)."""
        if self._end(topic, queue_id) < floor:
            return None
        view = self.store.published_queue(topic, queue_id)
        start = max(floor - LAST_LIVE_SEARCH, view.min_queue_offset if view is not None else floor)
        if view is None or start >= floor:
            return None
        commitlog_min = self.store.commitlog.min_offset
        entries = view.read(start, floor - start).tolist()
        for i in range(len(entries) - 1, -1, -1):
            phys, size, _ = entries[i]
            if entry_live(phys, size, commitlog_min):
                return Located(start + i, phys, size)
        return None

