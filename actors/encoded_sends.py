"""The writer's side of producer-encoded sends (``ipc.encoded``): batch work, not message work.

A ``send_encoded`` request carries whole records and their columns (``engine.record_batch``). The
writer checks them with numpy, picks queues for the whole batch at once (explicit, round robin per
topic, or by shard hash), appends them with ``CommitLogWriter.write_batch`` (one copy per file,
fields stamped in place), and answers with one packed row per record written. The builders learn
the batch as one ``DispatchBatch``. The requests of one poll round are merged into one batch first
(``merge``), so the fixed cost of a check, an append and a dispatch is paid once per round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import zmq

from actors.runtime import wall_ms
from engine.config import StoreConfig, check_topic
from engine.dispatch import DISPATCH_COLUMNS, DispatchBatch
from engine.jhash import tags_code
from engine.message import PutStatus
from engine.record_batch import COLUMNS, QUEUE_BY_SHARD, QUEUE_ROUND_ROBIN, BatchError, CheckedBatch, check_batch
from engine.topics import TopicError, TopicTable
from engine.writer import BatchOutcome
from ipc import schema

if TYPE_CHECKING:
    from actors.writer import CommitLogWriterActor

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


def merge(requests: list[EncodedRequest]) -> EncodedRequest:
    """Several requests as one batch (topic and tag tables joined, the columns' indices remapped), so
    a poll round's sends take one check, one append and one dispatch. Raises BatchError or
    IndexError for a request whose columns do not match its tables."""
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
    return EncodedRequest(b"".join(r.records for r in requests), np.concatenate(parts).tobytes(), list(topics),
                          list(tags), [k for r in requests for k in r.keys], [u for r in requests for u in r.uniq_keys])


def reply_fields(queue_ids: np.ndarray[Any, Any], outcome: BatchOutcome, rows_from: int = 0,
                 rows_to: int | None = None) -> dict[str, Any]:
    """The reply to the request whose records are rows [rows_from, rows_to) of the batch."""
    written = len(outcome.phys_offsets)
    end = written if rows_to is None else min(rows_to, written)
    rows = np.empty(max(end - rows_from, 0), dtype=REPLY_DTYPE)
    rows["phys_offset"] = outcome.phys_offsets[rows_from:end]
    rows["queue_id"] = queue_ids[rows_from:end]
    rows["queue_offset"] = outcome.queue_offsets[rows_from:end]
    status, reason = outcome.failure
    return {"results": rows.tobytes(), "status": status.value, "reason": reason, "written_status": "PUT_OK"}


def write_round(actor: CommitLogWriterActor, sends: list[tuple[bytes, Any, dict[str, Any]]],
                ingress: zmq.Socket[Any], dispatch_out: zmq.Socket[Any], written_out: zmq.Socket[Any]) -> None:
    """A poll round's producer-encoded batches, merged into one batch (up to max_batch_messages
    records) so they take one check, one append and one dispatch; a merged batch that does not
    hold together is taken apart, and only the request at fault is refused."""
    cfg = actor.rt.config
    if actor.disk is not None and actor.disk.disk_full:
        for identity, request_id, _ in sends:
            actor._reply(ingress, identity, schema.ok_reply(
                request_id, results=b"", status=PutStatus.SERVICE_NOT_AVAILABLE.value, written_status="PUT_OK",
                reason=f"disk {actor.disk.used_ratio:.0%} used: sends are refused until space returns"))
        return
    groups: list[list[tuple[bytes, Any, EncodedRequest]]] = [[]]
    rows = 0
    for identity, request_id, message in sends:
        try:
            request = parse(message)
        except schema.SchemaError as exc:
            actor._reply(ingress, identity, schema.error_reply(request_id, schema.BAD_REQUEST, str(exc)))
            continue
        count = len(request.columns) // COLUMNS.itemsize
        if rows + count > cfg.broker.max_batch_messages and groups[-1]:
            groups.append([])
            rows = 0
        groups[-1].append((identity, request_id, request))
        rows += count
    for group in groups:
        if len(group) > 1:
            try:
                _append(actor, group, merge([r for _, _, r in group]), ingress, dispatch_out,
                                     written_out)
                continue
            except (BatchError, IndexError):
                pass  # one of them is at fault: each alone
        for one in group:
            try:
                _append(actor, [one], one[2], ingress, dispatch_out, written_out)
            except BatchError as exc:
                actor._reply(ingress, one[0], schema.error_reply(one[1], PutStatus.MESSAGE_ILLEGAL.value, str(exc)))

def _append(actor: CommitLogWriterActor, group: list[tuple[bytes, Any, EncodedRequest]], request: EncodedRequest,
            ingress: zmq.Socket[Any], dispatch_out: zmq.Socket[Any], written_out: zmq.Socket[Any]) -> None:
    """Check, pick queues, append, answer every request of the group; BatchError before any write."""
    cfg = actor.rt.config
    checked = check(request, cfg.store, cfg.broker.max_batch_messages)
    queue_ids = pick_queues(request, checked, actor.topics, cfg.broker.default_queues,
                                          actor.round_robin)
    start = actor.commitlog.max_offset
    outcome = actor.writer.write_batch(request.records, checked, request.topics, queue_ids, wall_ms())
    end = actor.commitlog.max_offset
    written = len(outcome.phys_offsets)
    sync = cfg.sync_flush and written > 0
    if sync:
        written_out.send_multipart([schema.WRITTEN, schema.pack({"v": schema.VERSION, "end": end,
                                                                 "store_ms": outcome.store_ms, "sync": True})])
    first = 0
    for identity, request_id, one in group:
        last = first + len(one.columns) // COLUMNS.itemsize
        fields = reply_fields(queue_ids, outcome, first, last)
        first = last
        if sync:
            actor._hold_for_flush(end, identity, request_id, fields)
        else:
            actor._reply(ingress, identity, schema.ok_reply(request_id, **fields))
    if not written:
        return
    actor.last_store_ms = outcome.store_ms
    batch = dispatch_batch(request, checked, queue_ids, outcome)
    if sync:
        actor.undispatched.append((start, end, batch))
    else:
        actor._publish(dispatch_out, start, end, batch)
