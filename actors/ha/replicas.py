"""How far the copies of a master's commitlog reach: the master's own (the writer's end) and each
slave's acknowledged end, slaves counted by broker id, never by connection (RocketMQ 5's
GroupTransferService counts connections, so one peer connected twice counts twice).

``replicated()`` is the ``Replicated`` notice the writer waits on: ``end`` is the offset below which
``in_sync_replicas`` copies (the master's included) hold the log, 0 while fewer copies exist; a
SYNC_MASTER send ending at or below it has its copies.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqstore.actors.ha.write_times import WriteTimes
from mqstore.ipc.wire.notices import Replicated


@dataclass(slots=True)
class SlaveCopy:
    """One connected slave's copy, past its handshake."""

    broker_id: int
    address: str
    acked: int = 0          # the slave's last reported end: it holds the log below it
    acked_ms: int = 0       # when it reported it (monotonic ms)


class ReplicaSet:
    def __init__(self, in_sync_replicas: int, max_gap_not_in_sync: int) -> None:
        self.in_sync_replicas = in_sync_replicas
        self.max_gap_not_in_sync = max_gap_not_in_sync
        self.slaves: dict[int, SlaveCopy] = {}
        self.write_times = WriteTimes()  # when the master's end passed each offset, for the lag in time

    def join(self, broker_id: int, address: str, now_ms: int) -> SlaveCopy | None:
        """A slave past its handshake; None when that broker id is connected already (the first is kept)."""
        if broker_id in self.slaves:
            return None
        copy = self.slaves[broker_id] = SlaveCopy(broker_id, address, 0, now_ms)
        return copy

    def leave(self, copy: SlaveCopy) -> None:
        if self.slaves.get(copy.broker_id) is copy:
            del self.slaves[copy.broker_id]

    def in_sync(self, master_end: int) -> int:
        return sum(1 for s in self.slaves.values() if master_end - s.acked <= self.max_gap_not_in_sync)

    def end(self, master_end: int) -> int:
        """The highest offset ``in_sync_replicas`` copies hold; 0 while there are fewer copies."""
        copies = sorted([master_end, *(min(s.acked, master_end) for s in self.slaves.values())], reverse=True)
        if len(copies) < self.in_sync_replicas:
            return 0
        return copies[self.in_sync_replicas - 1]

    def replicated(self, master_end: int, epoch: int) -> Replicated:
        return Replicated(self.end(master_end), self.in_sync(master_end), len(self.slaves), epoch)

    def stats(self, master_end: int, now_ms: int) -> list[dict[str, object]]:
        """Each slave as the status shows it: its id, address, acknowledged end, lag in bytes, lag in
        time (how long the first byte it lacks has been written: ``mqstore.actors.ha.write_times``), and
        how long since its last report."""
        if self.slaves:
            self.write_times.forget_below(min(s.acked for s in self.slaves.values()))
        return [{"broker_id": s.broker_id, "address": s.address, "acked": s.acked,
                 "lag_bytes": max(0, master_end - s.acked), "lag_ms": self.write_times.lag_ms(s.acked, now_ms),
                 "since_report_ms": max(0, now_ms - s.acked_ms)}
                for s in sorted(self.slaves.values(), key=lambda s: s.broker_id)]
