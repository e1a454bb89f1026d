"""The numpy queue-offset assignment of ``CommitLogWriter.write_batch`` that ``_native.group_ranks``
replaced: not a runtime path, only what the property tests hold ``assign_queue_offsets`` to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def assign_queue_offsets(next_queue_offsets: dict[tuple[str, int], int], topic_ids: np.ndarray[Any, Any],
                         queue_ids: np.ndarray[Any, Any], topics: Sequence[str]) -> np.ndarray[Any, Any]:
    """Each record's queue offset, counting on per (topic, queue) in batch order; moves
    ``next_queue_offsets`` past them."""
    topic_ids = topic_ids.astype(np.int64)
    groups, inverse, counts = np.unique((topic_ids << 32) | queue_ids, return_inverse=True, return_counts=True)
    order = np.argsort(inverse, kind="stable")
    rank = np.empty(len(inverse), np.int64)
    rank[order] = np.arange(len(inverse)) - np.repeat(np.cumsum(counts) - counts, counts)
    bases = np.array([next_queue_offsets.get((topics[g >> 32], g & 0xFFFFFFFF), 0) for g in groups.tolist()],
                     np.int64)
    queue_offsets: np.ndarray[Any, Any] = bases[inverse] + rank
    for g, base, n in zip(groups.tolist(), bases.tolist(), counts.tolist(), strict=True):
        next_queue_offsets[(topics[g >> 32], g & 0xFFFFFFFF)] = base + n
    return queue_offsets
