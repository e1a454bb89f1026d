"""engine/put/plan.py's ``merge`` and ``pick_queues`` as they were, a dozen numpy calls a request
and a topic, and its dispatch and reply rows as numpy wrote them column by column: the oracle the
writer's round-wide versions and the ``written_rows`` kernel are held to (the same columns and tables,
the same queue ids and round-robin turns, the same batches refused, the same row bytes)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS, DispatchBatch
from mqstore.engine.batch.key_text import KeyText
from mqstore.engine.batch.record_batch import (
    COLUMNS,
    QUEUE_BY_SHARD,
    QUEUE_ROUND_ROBIN,
    REPLY_ROW,
    BatchError,
    BatchOutcome,
    CheckedBatch,
)
from mqstore.engine.java.jhash import tags_code
from mqstore.engine.meta.topics import TopicError, TopicTable
from mqstore.engine.put.plan import EncodedRequest, _topic_refusal
from mqstore.engine.put.queue_selector import QueueIds, RoundRobin, shard_queues

Array = np.ndarray[Any, Any]


def pick_queues(request: EncodedRequest, checked: CheckedBatch, topics: TopicTable, default_queues: int,
                round_robin: RoundRobin) -> QueueIds:
    """Every record's queue id; raises BatchError for a refused topic or a queue out of range."""
    cols = checked.columns
    wanted = cols["queue"].astype(np.int64)
    queue_ids = wanted.copy()
    for index, name in enumerate(request.topics):
        reason = _topic_refusal(name)
        if reason is not None:
            raise BatchError(reason)
        try:
            count = topics.get_or_create(name, default_queues).queue_count
        except (TopicError, OSError) as exc:
            raise BatchError(str(exc)) from None
        if len(request.topics) == 1 and int(wanted.max()) == int(wanted.min()) == QUEUE_ROUND_ROBIN:
            return round_robin.turns(name, count, len(wanted))  # a batch to one topic, every queue the writer's pick
        rows = cols["topic"] == index
        if ((wanted >= count) & rows).any() or ((wanted < QUEUE_BY_SHARD) & rows).any():
            raise BatchError(f"queue id out of range: {name} has {count} queues")
        robin = np.flatnonzero(rows & (wanted == QUEUE_ROUND_ROBIN))
        if len(robin):
            queue_ids[robin] = round_robin.turns(name, count, len(robin))
        sharded = rows & (wanted == QUEUE_BY_SHARD)
        queue_ids[sharded] = shard_queues(cols["shard"][sharded], count)
    return queue_ids


def merge(requests: list[EncodedRequest]) -> EncodedRequest:
    """Several requests as one batch (topic and tag tables joined, the columns' indices remapped), so
    a poll round's sends take one check, one append and one dispatch. Raises BatchError or
    IndexError for a request whose columns do not match its tables. Requests with the same tables
    (a producer's batches to one topic) are joined as they are: ``check`` finds any index outside
    them."""
    if any(len(r.columns) % COLUMNS.itemsize for r in requests):
        raise BatchError("the columns are not whole rows")
    keys: list[str] = []
    uniq_keys: list[str] = []
    for r in requests:  # the key text of a round as the lists of strings a request carried were joined
        own_keys, own_uniq = r.keys.strings()
        keys += own_keys
        uniq_keys += own_uniq
    key_text = KeyText.of(uniq_keys, keys)
    records = b"".join(r.records for r in requests)
    first = requests[0]
    if all(r.topics == first.topics and r.tags == first.tags for r in requests):
        return EncodedRequest(records, b"".join(r.columns for r in requests), first.topics, first.tags, key_text)
    topics: dict[str, int] = {}
    tags: dict[str, int] = {}
    parts = []
    for r in requests:
        cols = np.frombuffer(r.columns, dtype=COLUMNS).copy()
        topic_map = np.array([topics.setdefault(t, len(topics)) for t in r.topics], np.int64)
        tag_map = np.array([tags.setdefault(t, len(tags)) for t in r.tags] + [-1], np.int64)
        if len(cols) and (int(cols["tag"].min()) < -1 or int(cols["tag"].max()) >= len(r.tags)):
            raise BatchError("a record names a tag outside the batch's table")
        cols["topic"] = topic_map[cols["topic"]]
        cols["tag"] = tag_map[cols["tag"]]
        parts.append(cols)
    return EncodedRequest(records, np.concatenate(parts).tobytes(), list(topics), list(tags), key_text)


def dispatch_batch(request: EncodedRequest, checked: CheckedBatch, queue_ids: QueueIds,
                   outcome: BatchOutcome) -> DispatchBatch:
    """The records written as one DispatchBatch, column by column (``plan.written_rows``' first half)."""
    n = len(outcome.phys_offsets)
    codes = np.array([tags_code(t) for t in request.tags] + [0], dtype=np.int64)  # tag -1 picks the last: 0
    columns = np.empty(n, dtype=DISPATCH_COLUMNS)
    columns["phys_offset"] = outcome.phys_offsets
    columns["size"] = checked.columns["size"][:n]
    columns["topic"] = checked.columns["topic"][:n]
    columns["queue_id"] = queue_ids[:n]
    columns["queue_offset"] = outcome.queue_offsets
    columns["tags_code"] = codes[checked.columns["tag"][:n]]
    columns["store_ms"] = outcome.store_ms
    columns["sys_flag"] = checked.sys_flags[:n]
    return DispatchBatch(columns, list(request.topics), request.keys.cut(0, n))


def pack_reply_rows(phys_offsets: Array, queue_ids: Array, queue_offsets: Array) -> bytes:
    """One ``REPLY_ROW`` per record written, packed."""
    rows = np.empty(len(phys_offsets), REPLY_ROW)
    rows["phys_offset"] = phys_offsets
    rows["queue_id"] = queue_ids
    rows["queue_offset"] = queue_offsets
    return rows.tobytes()


def reply_rows(queue_ids: QueueIds, outcome: BatchOutcome, rows_from: int = 0, rows_to: int | None = None) -> bytes:
    """The packed reply rows of the request whose records are rows [rows_from, rows_to) of the batch
    (``plan.written_rows``' second half, cut as ``plan.reply_rows_each`` cuts it)."""
    written = len(outcome.phys_offsets)
    end = max(written if rows_to is None else min(rows_to, written), rows_from)
    return pack_reply_rows(outcome.phys_offsets[rows_from:end], queue_ids[rows_from:end],
                           outcome.queue_offsets[rows_from:end])
