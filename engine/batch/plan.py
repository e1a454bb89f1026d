"""The writer's plan for a producer-encoded batch (``engine.batch.record_batch``), all columns, no messages.

A request carries whole records, their columns and the tables the columns index. Several requests
of one poll round are merged into one batch (``merge``: tables joined, indices remapped), checked
(``check``: a record carrying ``DELAY``, ``TRAN_MSG`` or a timer property is refused by the kernel,
since only a ``send`` goes through the put rules of ``engine.put_rewrite``), given queues at once
(``pick_queues``: explicit, or ``engine.queue_selector``'s round robin per topic or shard hash), and
once ``CommitLogWriter.write_batch`` has appended them, turned into one ``DispatchBatch`` for the
builders (``dispatch_batch``) and one packed reply row per record (``reply_rows``: phys offset,
queue id, queue offset, ``engine.batch.record_batch.REPLY_ROW``, which ``ipc.encoded`` reads).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from engine.batch.dispatch import DISPATCH_COLUMNS, DispatchBatch
from engine.batch.record_batch import (
    COLUMNS,
    QUEUE_BY_SHARD,
    QUEUE_ROUND_ROBIN,
    REPLY_ROW,
    BatchError,
    CheckedBatch,
    check_batch,
    pack_reply_rows,
)
from engine.config import StoreConfig, check_topic
from engine.jhash import tags_code
from engine.log.record import SCHEDULE_TOPIC
from engine.log.writer import BatchOutcome
from engine.queue_selector import QueueIds, RoundRobin, shard_queues
from engine.topics import TopicError, TopicTable


@dataclass(frozen=True, slots=True)
class EncodedRequest:
    records: bytes | memoryview  # a view of the receive buffer: read, never kept past the round
    columns: bytes
    topics: list[str]
    tags: list[str]
    keys: list[str]
    uniq_keys: list[str]


def check(request: EncodedRequest, config: StoreConfig, max_messages: int) -> CheckedBatch:
    """Raises BatchError for a batch that does not hold together."""
    checked = check_batch(request.records, request.columns, request.topics, store_host=config.store_host,
                          prop_crc=config.geometry.prop_crc, max_body_bytes=config.max_body_bytes)
    n = len(checked.columns)
    if n > max_messages or len(request.keys) != n or len(request.uniq_keys) != n:
        raise BatchError(f"a batch carries 1 to {max_messages} records, with one key string and one UNIQ_KEY each")
    tag_ids = checked.columns["tag"]
    if (tag_ids < -1).any() or (tag_ids >= len(request.tags)).any():
        raise BatchError("a record names a tag outside the batch's table")
    if SCHEDULE_TOPIC in request.topics:
        raise BatchError(f"a record names {SCHEDULE_TOPIC}: delayed messages go through send "
                         "(ipc.client.Producer.send), where the writer stores them by their delay level")
    return checked


_topic_refusal = functools.lru_cache(maxsize=4096)(check_topic)  # the rule's regex once a topic, not once a round


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


def dispatch_batch(request: EncodedRequest, checked: CheckedBatch, queue_ids: QueueIds,
                   outcome: BatchOutcome) -> DispatchBatch:
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
    return DispatchBatch(columns, list(request.topics), request.keys[:n], request.uniq_keys[:n])


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
    for r in requests:
        keys += r.keys
        uniq_keys += r.uniq_keys
    records = b"".join(r.records for r in requests)
    first = requests[0]
    if all(r.topics == first.topics and r.tags == first.tags for r in requests):
        return EncodedRequest(records, b"".join(r.columns for r in requests), first.topics, first.tags, keys,
                              uniq_keys)
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
    return EncodedRequest(records, np.concatenate(parts).tobytes(), list(topics), list(tags), keys, uniq_keys)


def reply_rows(queue_ids: QueueIds, outcome: BatchOutcome, rows_from: int = 0, rows_to: int | None = None) -> bytes:
    """The packed reply rows of the request whose records are rows [rows_from, rows_to) of the batch."""
    written = len(outcome.phys_offsets)
    end = max(written if rows_to is None else min(rows_to, written), rows_from)
    return pack_reply_rows(outcome.phys_offsets[rows_from:end], queue_ids[rows_from:end],
                           outcome.queue_offsets[rows_from:end])


def reply_rows_each(queue_ids: QueueIds, outcome: BatchOutcome, counts: list[int]) -> list[bytes]:
    """``reply_rows`` of consecutive requests of ``counts`` records each, packed once for the batch and
    cut by request."""
    packed = reply_rows(queue_ids, outcome)
    width = REPLY_ROW.itemsize
    out = []
    first = 0
    for count in counts:
        out.append(packed[first * width:(first + count) * width])
        first += count
    return out
