"""Consume-queue rows of commitlog ranges, regrouped by queue with one Spark shuffle.

A range task emits, per (topic, queue id), a numpy chunk of its records' rows in commitlog order,
keyed ``((topic, queue id), where the range starts)``. Partitioned by queue and sorted by that key,
a task receives every chunk of a queue back to back in commitlog order; ``queue_groups`` joins them.
Chunks rather than rows keep the shuffle to a few objects per range and queue.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from itertools import groupby
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
QueueKey = tuple[str, int]
ChunkKey = tuple[QueueKey, int]

QUEUE_ROW_DTYPE = np.dtype([("queue_offset", "<i8"), ("phys_offset", "<i8"), ("size", "<i4"), ("tags_code", "<i8")])
EMPTY_ROWS = np.zeros(0, dtype=QUEUE_ROW_DTYPE)


def queue_rows(rows: list[tuple[int, int, int, int]]) -> Array:
    return np.array(rows, dtype=QUEUE_ROW_DTYPE) if rows else EMPTY_ROWS


def queue_partition(key: ChunkKey) -> int:
    """By queue only, and the same in every worker (Python's own str hash is salted per process)."""
    (topic, queue_id), _ = key
    return zlib.crc32(f"{topic}\0{queue_id}".encode())


def by_queue(chunks: Any, queue_count: int, parallelism: int) -> Any:
    """An RDD of (ChunkKey, rows) regrouped: each queue in one partition, its chunks in key order."""
    partitions = max(1, min(queue_count, 2 * parallelism))
    return chunks.repartitionAndSortWithinPartitions(partitions, partitionFunc=queue_partition,
                                                     keyfunc=lambda key: key)


def queue_groups(items: Iterable[tuple[ChunkKey, Array]]) -> Iterator[tuple[QueueKey, Array]]:
    """(queue, all its rows in commitlog order) for each queue of a partition ``by_queue`` made."""
    for key, chunks in groupby(items, key=lambda item: item[0][0]):
        yield key, np.concatenate([chunk for _, chunk in chunks])
