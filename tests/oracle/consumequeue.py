"""The consume-queue entries of a batch of dispatch rows as engine/consumequeue/store.py computed them
before the kernel (``mqstore.engine._native.cq_entries``): numpy masks, a stable argsort and field copies."""

from __future__ import annotations

from typing import Any

import numpy as np

from mqstore.engine.consumequeue.entry import CQ_DTYPE
from mqstore.engine.log.record import SYSFLAG_TX_COMMIT, SYSFLAG_TX_MASK

Array = np.ndarray[Any, Any]


def queue_entry_mask(columns: Array) -> Array:
    """Which rows of ``DISPATCH_COLUMNS`` get a consume-queue entry (``has_queue_entry``)."""
    tx = columns["sys_flag"] & SYSFLAG_TX_MASK
    return (tx == 0) | (tx == SYSFLAG_TX_COMMIT)  # type: ignore[no-any-return]


def queue_entries(rows: Array) -> tuple[Array, Array, list[int], list[tuple[int, int]], int]:
    """``entries`` (CQ_DTYPE) and ``queue_offsets`` queue by queue, the ``bounds`` of each queue's, each
    queue's (topic code, queue id), and the smallest phys offset (0 with no entries)."""
    rows = rows[queue_entry_mask(rows)]
    if not len(rows):
        return np.empty(0, CQ_DTYPE), np.empty(0, np.int64), [0], [], 0
    group = (rows["topic"].astype(np.int64) << 32) | rows["queue_id"].astype(np.int64)
    if bool((group == group[0]).all()):
        bounds = [0, len(rows)]
    else:
        order = np.argsort(group, kind="stable")  # commitlog order within each queue
        rows, group = rows[order], group[order]
        bounds = [0, *(np.flatnonzero(group[1:] != group[:-1]) + 1).tolist(), len(rows)]
    entries = np.empty(len(rows), dtype=CQ_DTYPE)
    for name in ("phys_offset", "size", "tags_code"):
        entries[name] = rows[name]
    queues = [(int(rows["topic"][first]), int(rows["queue_id"][first])) for first in bounds[:-1]]
    return entries, rows["queue_offset"].astype(np.int64), bounds, queues, int(rows["phys_offset"].min())
