"""Retention and disk watermarks: RocketMQ's CleanCommitLogService, as decisions and file deletions.

When to delete commitlog files (any of):
- the local hour is one of ``delete_when`` (``"04"``, or ``"02;04"``): files older than
  ``file_reserved_hours`` go;
- the disk is past ``disk_max_used_space_ratio`` (75 %): expired files go at once, whatever the hour;
- past ``disk_clean_forcibly_ratio`` (85 %): the oldest files go even if young;
- past ``disk_warning_ratio`` (90 %) the store is full: sends are refused until usage drops again.

Deletion never removes the newest file and never skips over a file (oldest first, stop at the first
keeper), at most ``delete_file_batch_max`` files a round. A file expires ``file_reserved_hours`` after
it was last written (``RetentionPolicy.expires_ms``). A caller may veto a file (``is_deletable``):
``keep_unacked`` and ``reclaim_consumed`` both keep every file that reaches past a watermark, the first
commitlog offset someone still needs (``ends_by``). Consume-queue and index files
wholly below the commitlog's new minimum then go, and queue min offsets are corrected.

With ``reclaim_consumed`` a file every group has consumed goes on the next round, whatever the
clock (``mqstore.engine.reclaim.consumed`` decides; ``delete_consumed_commitlog`` deletes, by the same rules).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.mapped_file import MappedFile


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    file_reserved_hours: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: float = 0.75
    disk_clean_forcibly_ratio: float = 0.85
    disk_warning_ratio: float = 0.90
    delete_file_batch_max: int = 10
    keep_unacked: bool = False  # never delete a file holding a message an ack-mode group has not acked
    # delete a file every group consumed at once, not on the clock (mqstore.engine.reclaim.consumed)
    reclaim_consumed: bool = False
    # with reclaim_consumed: move the unacked messages holding the oldest file when their bytes are
    # below this share of it (mqstore.engine.reclaim.move; RabbitMQ's merge); 0: never
    move_stragglers_below: float = 0.0

    def validate(self) -> RetentionPolicy:
        """Errors start with the key they are about, for a configuration file to put its section before."""
        ratios = (self.disk_max_used_space_ratio, self.disk_clean_forcibly_ratio, self.disk_warning_ratio)
        if not 0 < ratios[0] <= ratios[1] <= ratios[2] <= 1:
            raise ValueError("disk_max_used_space_ratio, disk_clean_forcibly_ratio and disk_warning_ratio must rise "
                             f"within (0, 1], got {', '.join(map(str, ratios))}")
        if self.file_reserved_hours < 0:
            raise ValueError(f"file_reserved_hours must not be negative, got {self.file_reserved_hours}")
        if self.delete_file_batch_max < 1:
            raise ValueError(f"delete_file_batch_max must be at least 1, got {self.delete_file_batch_max}")
        if not 0 <= self.move_stragglers_below < 1:
            raise ValueError(f"move_stragglers_below must be in [0, 1), got {self.move_stragglers_below}")
        if self.move_stragglers_below and not self.reclaim_consumed:
            raise ValueError("move_stragglers_below needs reclaim_consumed = true")
        self.delete_hours()
        return self

    @property
    def reserved_ms(self) -> int:
        return self.file_reserved_hours * 3_600_000

    def expires_ms(self, mf: MappedFile) -> int:
        """When the clock lets a commitlog file go: ``file_reserved_hours`` after its last write."""
        return mf.last_modified_ms() + self.reserved_ms

    def delete_hours(self) -> frozenset[int]:
        hours = [h.strip() for h in self.delete_when.split(";") if h.strip()]
        if not all(h.isdecimal() and 0 <= int(h) < 24 for h in hours):
            raise ValueError(f"delete_when must list hours 00..23 separated by ';', got {json.dumps(self.delete_when)}")
        return frozenset(int(h) for h in hours)


@dataclass(frozen=True, slots=True)
class CleanupDecision:
    delete: bool             # whether a deletion round runs now
    clean_immediately: bool  # delete regardless of age (disk past the forcible ratio)
    disk_full: bool          # refuse sends
    used_ratio: float
    reason: str


def disk_used_ratio(path: Path | str) -> float:
    """RocketMQ's getDiskPartitionSpaceUsedPercent: ceil(used * 100 / (used + available)) / 100."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    available = st.f_bavail * st.f_frsize
    if used + available <= 0:
        return 1.0
    return math.ceil(used * 100 / (used + available)) / 100


def decide(policy: RetentionPolicy, used_ratio: float, now_ms: int, *, manual: bool = False) -> CleanupDecision:
    """What a cleanup round should do now, given the disk's usage and the (local) time."""
    hour = time.localtime(now_ms / 1000).tm_hour
    full = used_ratio >= policy.disk_warning_ratio
    forcibly = used_ratio >= policy.disk_clean_forcibly_ratio
    if full or forcibly:
        return CleanupDecision(True, True, full, used_ratio,
                               f"disk {used_ratio:.0%} used: past {policy.disk_clean_forcibly_ratio:.0%}, "
                               "deleting the oldest files whatever their age")
    if used_ratio >= policy.disk_max_used_space_ratio:
        return CleanupDecision(True, False, False, used_ratio,
                               f"disk {used_ratio:.0%} used: past {policy.disk_max_used_space_ratio:.0%}")
    if hour in policy.delete_hours():
        return CleanupDecision(True, False, False, used_ratio, f"it is {hour:02d}h, a delete hour")
    if manual:
        return CleanupDecision(True, False, False, used_ratio, "asked for")
    return CleanupDecision(False, False, False, used_ratio, "")


def delete_expired_commitlog(commitlog: CommitLog, policy: RetentionPolicy, decision: CleanupDecision, now_ms: int,
                             is_deletable: Callable[[MappedFile], bool] | None = None) -> int:
    """One deletion round over the oldest commitlog files; returns how many went."""
    if not decision.delete:
        return 0
    return commitlog.queue.delete_expired_by_time(policy.reserved_ms, now_ms,
                                                  clean_immediately=decision.clean_immediately,
                                                  batch_max=policy.delete_file_batch_max, is_deletable=is_deletable)


def file_may_go(file_end: int, watermark: int) -> bool:
    """A file holds nothing anyone needs when it ends at or below ``watermark``, the first commitlog
    offset someone still needs."""
    return file_end <= watermark


def ends_by(watermark: int) -> Callable[[MappedFile], bool]:
    """The veto that keeps every file reaching past ``watermark`` (``file_may_go``)."""
    return lambda mf: file_may_go(mf.file_end, watermark)


def delete_consumed_commitlog(commitlog: CommitLog, policy: RetentionPolicy, consumed_end: int) -> int:
    """One reclamation round: the oldest files ending at or below ``consumed_end`` (never the newest)."""
    return commitlog.queue.delete_expired_by_time(0, 0, clean_immediately=True, batch_max=policy.delete_file_batch_max,
                                                  is_deletable=ends_by(consumed_end))


def delete_derived_below(min_phys_offset: int, queues: ConsumeQueueStore | None,
                         index: IndexService | None) -> tuple[int, int]:
    """Consume-queue and index files wholly below the commitlog's minimum; queue mins corrected."""
    cq_deleted = queues.delete_expired(min_phys_offset) if queues is not None else 0
    index_deleted = index.delete_before(min_phys_offset) if index is not None else 0
    return cq_deleted, index_deleted
