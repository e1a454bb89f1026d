"""The writer's side of producer-encoded sends (``ipc.encoded``): batch work, not message work.

A ``send_encoded`` request carries whole records and their columns (``engine.record_batch``). The
writer checks them with numpy, picks queues for the whole batch at once (explicit, round robin per
topic, or by shard hash), appends them with ``CommitLogWriter.write_batch`` (one copy per file,
fields stamped in place), and answers with one packed row per record written. The builders learn
the batch as one ``DispatchBatch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.config import StoreConfig, check_topic
from engine.dispatch import DISPATCH_COLUMNS, DispatchBatch
from engine.jhash import tags_code
from engine.record_batch import QUEUE_BY_SHARD, QUEUE_ROUND_ROBIN, BatchError, CheckedBatch, check_batch
from engine.topics import TopicError, TopicTable
from engine.writer import BatchOutcome
from ipc import schema

REPLY_DTYPE = np.dtype([("phys_offset", "<i8"), ("queue_id", "<i4"), ("queue_offset", "<i8")])  # ipc.encoded


@dataclass(frozen=True, slots=True)
class EncodedRequest:
    records: bytes
    columns: bytes
    topics: list[str]
    tags: list[str]
    keys: list[str]
    uniq_keys: list[str]


def encoding_fields(config: StoreConfig) -> dict[str, Any]:
    """What a producer needs to encode records for this writer."""
    host = config.store_host
    return {"store_host": [host.ip, host.port], "prop_crc": config.geometry.prop_crc,
            "max_body_bytes": config.max_body_bytes}


def parse(message: dict[str, Any]) -> EncodedRequest:
    request = EncodedRequest(schema.field(message, "records", bytes), schema.field(message, "columns", bytes),
                             schema.field(message, "topics", list), schema.field(message, "tags", list),
                             schema.field(message, "keys", list), schema.field(message, "uniq", list))
    for name in ("topics", "tags", "keys", "uniq_keys"):
        if not all(isinstance(v, str) for v in getattr(request, name)):
            raise schema.SchemaError(f"{name} must be strings")
    return request


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
    return checked


def pick_queues(request: EncodedRequest, checked: CheckedBatch, topics: TopicTable, default_queues: int,
                round_robin: dict[str, int]) -> np.ndarray[Any, Any]:
    """Every record's queue id; raises BatchError for a refused topic or a queue out of range."""
    cols = checked.columns
    wanted = cols["queue"].astype(np.int64)
    queue_ids = wanted.copy()
    for index, name in enumerate(request.topics):
        reason = check_topic(name)
        if reason is not None:
            raise BatchError(reason)
        try:
            count = topics.get_or_create(name, default_queues).queue_count
        except (TopicError, OSError) as exc:
            raise BatchError(str(exc)) from None
        rows = cols["topic"] == index
        if ((wanted >= count) & rows).any() or ((wanted < QUEUE_BY_SHARD) & rows).any():
            raise BatchError(f"queue id out of range: {name} has {count} queues")
        robin = np.flatnonzero(rows & (wanted == QUEUE_ROUND_ROBIN))
        if len(robin):
            n = round_robin.get(name, 0)
            queue_ids[robin] = (n + np.arange(len(robin))) % count
            round_robin[name] = n + len(robin)
        sharded = rows & (wanted == QUEUE_BY_SHARD)
        queue_ids[sharded] = cols["shard"][sharded].astype(np.int64) % count
    return queue_ids


def dispatch_batch(request: EncodedRequest, checked: CheckedBatch, queue_ids: np.ndarray[Any, Any],
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


def reply_fields(queue_ids: np.ndarray[Any, Any], outcome: BatchOutcome) -> dict[str, Any]:
    rows = np.empty(len(outcome.phys_offsets), dtype=REPLY_DTYPE)
    rows["phys_offset"] = outcome.phys_offsets
    rows["queue_id"] = queue_ids[:len(rows)]
    rows["queue_offset"] = outcome.queue_offsets
    status, reason = outcome.failure
    return {"results": rows.tobytes(), "status": status.value, "reason": reason, "written_status": "PUT_OK"}
