"""What the writer's rounds share, each piece a small class the loop owns and hands down.

- the commitlog's write path (``mqstore.engine.put.writer.CommitLogWriter``): queue offsets, appends;
- ``TopicQueues``: the topic table and where round robin stands per topic, one for both kinds of
  send (messages as maps, producer-encoded batches);
- ``DiskState``: the last disk check, which refuses sends while the disk is full;
- ``SyncWaiters`` (``mqstore.actors.writer.sync``): what waits for a flush (SYNC_FLUSH) or copies (SYNC_MASTER).

``WriterState`` bundles them with the broker's configuration; the sockets a round answers and
publishes on come beside it, as ``mqstore.actors.writer.outlets.Outlets``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from mqstore.actors.config import BrokerConfig
from mqstore.actors.config_ha import serves_slaves
from mqstore.actors.writer.sync import SyncWaiters
from mqstore.engine.meta.topics import TopicTable
from mqstore.engine.put.queue_selector import RoundRobin
from mqstore.engine.put.writer import CommitLogWriter
from mqstore.engine.reclaim.retention import CleanupDecision

log = logging.getLogger("mqstore")


class TopicQueues:
    """Topics created on first send with ``default_queues`` queues, and the round-robin turns of each."""

    __slots__ = ("default_queues", "round_robin", "table")

    def __init__(self, table: TopicTable, default_queues: int) -> None:
        self.table = table
        self.default_queues = default_queues
        self.round_robin = RoundRobin()

    def queue_count(self, topic: str) -> int:
        """Raises TopicError for a topic refused, OSError when a new one cannot be persisted."""
        return self.table.get_or_create(topic, self.default_queues).queue_count

    def persist(self) -> None:
        """Write the topics made since the last write, if any: each tick, and before a round answers
        the sends that made them, so a client acting on the answer (a consumer asking the readers for
        the topic's queues) finds every queue configured, not only those whose files the builder has
        made so far. A write that fails is logged and left to the next tick."""
        try:
            self.table.flush()
        except OSError:
            log.exception("cannot persist topics; retrying")  # the table stays dirty


@dataclass(slots=True)
class DiskState:
    """The last disk check (``mqstore.engine.reclaim.retention.decide``): sends are refused while it says full."""

    decision: CleanupDecision | None = None
    checked_end: int = -1  # the commitlog's end at the last check

    def due_ms(self, check_ms: int, clean_ms: int, written_end: int) -> int:
        """When the disk is looked at next: at ``check_ms``, the check's cadence, while the log grew
        since the last look (a look then comes right after the first round that writes), sends are
        refused or the disk is past the forcible ratio (the drop that ends either is watched for);
        else with the cleanup's cadence (``clean_ms``) alone: an idle writer fills no disk, so it
        sleeps, and a disk another process filled meanwhile is seen at the first round that writes."""
        decision = self.decision
        if written_end != self.checked_end or decision is None or decision.disk_full or decision.clean_immediately:
            return check_ms
        return max(check_ms, clean_ms)

    @property
    def full(self) -> bool:
        return self.decision is not None and self.decision.disk_full

    @property
    def used_ratio(self) -> float:
        return self.decision.used_ratio if self.decision is not None else 0.0


@dataclass(frozen=True, slots=True)
class WriterState:
    """The pieces every round gets, owned by the loop."""

    config: BrokerConfig
    writer: CommitLogWriter
    queues: TopicQueues
    disk: DiskState
    waiters: SyncWaiters

    @property
    def tells_slaves(self) -> bool:
        """Whether each round announces its end (``written``) for a master's HA actor, which pushes
        the new bytes to the slaves as soon as it hears of them: the tick's notice alone would hold
        every SYNC_MASTER answer, and the slaves' lag, up to a tick."""
        return serves_slaves(self.config.broker.role, self.config.ha)
