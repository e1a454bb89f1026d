"""The writer's plan for a producer-encoded batch (``engine.batch.record_batch``): all columns, no messages.

A request carries whole records, their columns and the tables the columns index. Several requests
of one poll round are merged into one batch (``merge``: tables joined, indices remapped), checked
(``check``: a record carrying ``DELAY``, ``TRAN_MSG`` or a timer property is refused by the kernel,
since only a ``send`` goes through the put rules of ``mqstore.engine.put.rewrite``), given queues at once
(``pick_queues``: explicit, or ``mqstore.engine.put.queue_selector``'s round robin per topic or shard hash), and
once ``CommitLogWriter.write_batch`` has appended them, turned into one ``DispatchBatch`` for the
builders and one packed reply row per record (phys offset, queue id, queue offset,
``mqstore.engine.batch.record_batch.REPLY_ROW``, which ``mqstore.ipc.wire.encoded`` reads) in one compiled call
(``written_rows``), the replies cut by request (``reply_rows_each``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from mqstore.engine import _native
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
    check_batch,
)
from mqstore.engine.config import StoreConfig
from mqstore.engine.java.jhash import tags_code
from mqstore.engine.log.record import SCHEDULE_TOPIC
from mqstore.engine.meta.topics import TopicError, TopicTable
from mqstore.engine.names import check_topic
from mqstore.engine.put.queue_selector import QueueIds, RoundRobin, shard_queues


@dataclass(frozen=True, slots=True)
class EncodedRequest:
    records: bytes | memoryview  # a view of the receive buffer: read, never kept past the round
    columns: bytes
    topics: list[str]
    tags: list[str]
    keys: KeyText  # each record's UNIQ_KEY and KEYS, as the request carried them


def check(request: EncodedRequest, config: StoreConfig, max_messages: int) -> CheckedBatch:
    """Raises BatchError for a batch that does not hold together."""
    checked = check_batch(request.records, request.columns, request.topics, store_host=config.store_host,
                          prop_crc=config.geometry.prop_crc, max_body_bytes=config.max_body_bytes)
    n = len(checked.columns)
    if n > max_messages or len(request.keys) != n:
        raise BatchError(f"a batch carries 1 to {max_messages} records, with one KEYS and one UNIQ_KEY each")
    try:
        request.keys.check(n)
    except ValueError as exc:
        raise BatchError(f"malformed key text: {exc}") from None
    tag_ids = checked.columns["tag"]
    if (tag_ids < -1).any() or (tag_ids >= len(request.tags)).any():
        raise BatchError("a record names a tag outside the batch's table")
    if SCHEDULE_TOPIC in request.topics:
        raise BatchError(f"a record names {SCHEDULE_TOPIC}: delayed messages go through send "
                         "(mqstore.ipc.client.api.Producer.send), where the writer stores them by their delay level")
    return checked


_topic_refusal = functools.lru_cache(maxsize=4096)(check_topic)  # the rule's regex once a topic, not once a round


def pick_queues(request: EncodedRequest, checked: CheckedBatch, topics: TopicTable, default_queues: int,
                round_robin: RoundRobin) -> QueueIds:
    """Every record's queue id; raises BatchError for a refused topic or a queue out of range. Topics
    are taken in their table's order, each checked (and created) before its round-robin turns are
    taken. When the writer picks every queue (the producers' common case) the rows are grouped by
    topic once, so a topic costs a slice and its turns, not a dozen passes over the batch."""
    cols = checked.columns
    wanted = cols["queue"].astype(np.int64)
    writer_picks = len(wanted) > 0 and int(wanted.max()) == int(wanted.min()) == QUEUE_ROUND_ROBIN
    if writer_picks and len(request.topics) > 1:
        by_topic = np.argsort(cols["topic"], kind="stable")  # each topic's rows, in batch order
        ends = np.cumsum(np.bincount(cols["topic"], minlength=len(request.topics))).tolist()
        queue_ids = np.empty(len(wanted), np.int64)
        start = 0
        for name, end in zip(request.topics, ends, strict=False):
            count = _queue_count(name, topics, default_queues)
            if end > start:
                queue_ids[by_topic[start:end]] = round_robin.turns(name, count, end - start)
            start = end
        return queue_ids
    queue_ids = wanted.copy()
    for index, name in enumerate(request.topics):
        count = _queue_count(name, topics, default_queues)
        if len(request.topics) == 1 and writer_picks:
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


def _queue_count(name: str, topics: TopicTable, default_queues: int) -> int:
    """The topic's queue count, the topic created on its first send; BatchError for one refused."""
    reason = _topic_refusal(name)
    if reason is not None:
        raise BatchError(reason)
    try:
        return topics.get_or_create(name, default_queues).queue_count
    except (TopicError, OSError) as exc:
        raise BatchError(str(exc)) from None


def written_rows(request: EncodedRequest, checked: CheckedBatch, queue_ids: QueueIds,
                 outcome: BatchOutcome) -> tuple[DispatchBatch, bytes]:
    """The records written as one ``DispatchBatch`` for the builders, and their ``REPLY_ROW``s packed:
    one compiled call (``_native.written_rows``) writes both, with each record's tags code."""
    n = len(outcome.phys_offsets)
    rows = np.empty(n, DISPATCH_COLUMNS)
    replies = _native.written_rows(request.columns, checked.sys_flags, np.ascontiguousarray(queue_ids, np.int64),
                                   outcome.phys_offsets, np.ascontiguousarray(outcome.queue_offsets, np.int64),
                                   _tags_codes(tuple(request.tags)), outcome.store_ms, rows)
    return DispatchBatch(rows, list(request.topics), request.keys.cut(0, n)), replies


@functools.lru_cache(maxsize=256)
def _tags_codes(tags: tuple[str, ...]) -> np.ndarray:
    """Each tag's tags code and a last 0, for records without tags: once a tags table, not once a round."""
    return np.array([tags_code(t) for t in tags] + [0], dtype=np.int64)


def merge(requests: list[EncodedRequest]) -> EncodedRequest:
    """Several requests as one batch (topic and tag tables joined, the columns' indices remapped), so
    a poll round's sends take one check, one append and one dispatch. Raises BatchError or
    IndexError for a request whose columns do not match its tables. Requests with the same tables
    (a producer's batches to one topic) are joined as they are: ``check`` finds any index outside
    them. Otherwise the columns are remapped all at once: each row's table index moved by where its
    request's table starts in the joined maps, a fixed number of numpy calls a round, not a dozen
    a request."""
    if any(len(r.columns) % COLUMNS.itemsize for r in requests):
        raise BatchError("the columns are not whole rows")
    try:
        keys = KeyText.join([r.keys for r in requests])
    except ValueError as exc:
        raise BatchError(f"malformed key text: {exc}") from None
    records = b"".join(r.records for r in requests)
    columns = b"".join(r.columns for r in requests)
    first = requests[0]
    if all(r.topics == first.topics and r.tags == first.tags for r in requests):
        return EncodedRequest(records, columns, first.topics, first.tags, keys)
    topics: dict[str, int] = {}
    tags: dict[str, int] = {}
    # each request's block of the joined maps; a tag block starts with -1, what a row without tags keeps
    topic_map = np.array([topics.setdefault(t, len(topics)) for r in requests for t in r.topics], np.int64)
    tag_map = np.array([i for r in requests for i in (-1, *(tags.setdefault(t, len(tags)) for t in r.tags))],
                       np.int64)
    counts = [len(r.columns) // COLUMNS.itemsize for r in requests]
    blocks = np.array([(len(r.topics), len(r.tags) + 1) for r in requests], np.int64).reshape(-1, 2)
    starts = np.cumsum(blocks, axis=0) - blocks
    request_of = np.repeat(np.arange(len(requests)), counts)
    cols = np.frombuffer(columns, dtype=COLUMNS).copy()
    topic, tag = cols["topic"].astype(np.int64), cols["tag"].astype(np.int64)
    if (topic >= blocks[request_of, 0]).any():
        raise IndexError("a record names a topic outside its request's table")
    if (tag < -1).any() or (tag + 1 >= blocks[request_of, 1]).any():
        raise BatchError("a record names a tag outside the batch's table")
    cols["topic"] = topic_map[topic + starts[request_of, 0]]
    cols["tag"] = tag_map[tag + 1 + starts[request_of, 1]]
    return EncodedRequest(records, cols.tobytes(), list(topics), list(tags), keys)


def reply_rows_each(packed: bytes, counts: list[int]) -> list[bytes]:
    """The reply rows of consecutive requests of ``counts`` records each, cut from the batch's
    (``written_rows``): a request past the records written gets the rows it has, or none."""
    width = REPLY_ROW.itemsize
    out = []
    first = 0
    for count in counts:
        out.append(packed[first * width:(first + count) * width])
        first += count
    return out
