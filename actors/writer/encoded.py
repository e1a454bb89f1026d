"""The writer's side of producer-encoded sends (``ipc.encoded``): batch work, not message work.

A ``send_encoded`` request carries whole records and their columns (``engine.batch.record_batch``). The
requests of one poll round are merged into one batch (``engine.batch.plan``), checked with numpy,
given queues at once, appended with ``CommitLogWriter.write_batch`` (one copy per file, fields
stamped in place) and answered with one packed row per record written; the builders learn the
batch as one ``DispatchBatch``. The fixed cost of a check, an append and a dispatch is paid once
per round. A merged batch that does not hold together is taken apart: only the request at fault
is refused.

A request's records are a view of ZeroMQ's receive buffer (``ipc.schema``'s parts): a request alone
in its round is checked there and copied once, into the mapped file. Merging copies the records of
a round once more, and still costs less than a check, an append and a dispatch for each request:
replayed with prefaulted files, 4 KiB bodies in requests of 100, four a round, 6.0-6.8 us of writer
CPU a message merged, 7.4-8.3 appended one by one (and 38 against 40 with 32 KiB bodies).
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, Any

import zmq

from actors.runtime import wall_ms
from engine.batch.plan import EncodedRequest, check, dispatch_batch, merge, pick_queues, reply_rows
from engine.batch.record_batch import COLUMNS, BatchError
from engine.config import StoreConfig
from engine.log.message import PutStatus
from engine.log.writer import BatchOutcome
from ipc import schema
from ipc.notices import Written

if TYPE_CHECKING:
    from actors.writer.actor import CommitLogWriterActor

def encoding_fields(config: StoreConfig) -> dict[str, Any]:
    """What a producer needs to encode records for this writer."""
    host = config.store_host
    return {"store_host": [host.ip, host.port], "prop_crc": config.geometry.prop_crc,
            "max_body_bytes": config.max_body_bytes}


def parse(message: dict[str, Any]) -> EncodedRequest:
    """The request's map and its one part, the records (a view of ZeroMQ's buffer: no copy)."""
    parts = message.get("parts", ())
    if len(parts) != 1:
        raise schema.SchemaError(f"send_encoded carries its records as the one frame after its map, got "
                                 f"{len(parts)} frame(s)")
    request = EncodedRequest(parts[0], schema.field(message, "columns", bytes),
                             schema.field(message, "topics", list), schema.field(message, "tags", list),
                             schema.field(message, "keys", list), schema.field(message, "uniq", list))
    for name in ("topics", "tags", "keys", "uniq_keys"):
        if not all(map(isinstance, getattr(request, name), repeat(str))):
            raise schema.SchemaError(f"{name} must be strings")
    return request


def reply_fields(outcome: BatchOutcome, rows: bytes) -> dict[str, Any]:
    status, reason = outcome.failure
    return {"results": rows, "status": status.value, "reason": reason, "written_status": "PUT_OK"}


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
        written_out.send_multipart(Written(end, outcome.store_ms, True).frames())
    first = 0
    for identity, request_id, one in group:
        last = first + len(one.columns) // COLUMNS.itemsize
        fields = reply_fields(outcome, reply_rows(queue_ids, outcome, first, last))
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
