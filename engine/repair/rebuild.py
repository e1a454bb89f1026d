"""Rebuild a store's consume queues and index files from its commitlog.

The commitlog is the truth and everything else derives from it: the store is opened (which
recovers it, cutting a torn tail as any open does), every consume-queue and index file is deleted,
and every record is dispatched again in commitlog order, as the builders would have (a deleted
topic's records, below the offset its deletion recorded, get no queue entries). A kill part
way leaves derived files that the next open only partly repairs; running the rebuild again
finishes the job.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.config import StoreConfig
from mqstore.engine.meta.topics import deleted_topics
from mqstore.engine.repair.recovery import redispatch
from mqstore.engine.store import MessageStore


@dataclass(frozen=True, slots=True)
class RebuildResult:
    records: int               # records dispatched again
    min_phys_offset: int       # the commitlog range they came from
    max_phys_offset: int


def rebuild_derived(store_dir: Path | str, config: StoreConfig | None = None) -> RebuildResult:
    """Recreate ``consumequeue/`` and ``index/`` of the store at ``store_dir`` from its commitlog.
    Raises StoreLockedError when another process has the store open."""
    with MessageStore.open(store_dir, config) as store:
        commitlog, queues, index = store.commitlog, store.queues, store.index
        queues.delete_all()
        shutil.rmtree(queues.root)  # the emptied topic and queue directories too
        queues.root.mkdir(parents=True, exist_ok=True)
        if index is not None:
            index.truncate_after(0)  # every file: all their entries are at or after offset 0
        records, _ = redispatch(commitlog, queues, index, commitlog.min_offset, commitlog.min_offset,
                                commitlog.max_offset, levels=store.config.delay_levels,
                                deleted=deleted_topics(store_dir))
        queues.correct_min_offsets(commitlog.min_offset)
        result = RebuildResult(records, commitlog.min_offset, commitlog.max_offset)
    return result
