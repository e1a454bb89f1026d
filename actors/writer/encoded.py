"""The writer's side of producer-encoded sends (``mqstore.ipc.wire.encoded``): batch work, not message work.

A ``send_encoded`` request carries whole records and their columns (``mqstore.engine.batch.record_batch``). The
requests of one poll round are merged into one batch (``mqstore.engine.put.plan``), checked in one compiled call,
given queues at once, appended with ``CommitLogWriter.write_batch`` (one copy per file, fields
stamped in place) and answered with one packed row per record written; the builders learn the
batch as one ``DispatchBatch``; the answers and the batch go, or wait, as ``mqstore.actors.writer.answers``
has it for every kind of send. The fixed cost of a check, an append and a dispatch is paid once
per round. A merged batch that does not hold together is taken apart: only the request at fault
is refused. Queues are picked from the same topic table and round-robin turns as a map send's
(``mqstore.actors.writer.state.TopicQueues``). While the disk is full every request is refused as
SERVICE_NOT_AVAILABLE.

A request's records are a view of ZeroMQ's receive buffer (``mqstore.ipc.wire.schema``'s parts): a request alone
in its round is checked there and copied once, into the mapped file. Merging copies the records of
a round once more, and still costs less than a check, an append and a dispatch for each request:
replayed with prefaulted files, 4 KiB bodies in requests of 100, four a round, 6.0-6.8 us of writer
CPU a message merged, 7.4-8.3 appended one by one (and 38 against 40 with 32 KiB bodies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.actors.clock import wall_ms
from mqstore.actors.writer.answers import Answer, answer_round
from mqstore.actors.writer.outlets import Outlets
from mqstore.actors.writer.state import WriterState
from mqstore.engine.batch.key_text import KeyText
from mqstore.engine.batch.record_batch import COLUMNS, BatchError, BatchOutcome
from mqstore.engine.config import StoreConfig
from mqstore.engine.log.message import PutStatus
from mqstore.engine.put.plan import EncodedRequest, check, merge, pick_queues, reply_rows_each, written_rows
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Dispatch
from mqstore.ipc.wire.replies import EncodingReply, SendEncodedReply
from mqstore.ipc.wire.requests import SendEncoded


@dataclass(slots=True)
class EncodedSend:
    """A ``send_encoded`` request, kept whole until its round merges it (``parse`` then checks it)."""

    identity: bytes
    request_id: Any
    request: SendEncoded  # its records a view of ZeroMQ's buffer


def encoding_reply(config: StoreConfig, max_request_bytes: int = schema.MAX_FRAME_BYTES) -> EncodingReply:
    """What a producer needs to encode records for this writer, and the most one request may carry."""
    return EncodingReply(config.store_host, config.geometry.prop_crc, config.max_body_bytes, max_request_bytes)


def parse(message: dict[str, Any]) -> EncodedRequest:
    """The engine's request of an unpacked ``send_encoded`` map (its records a view of ZeroMQ's buffer)."""
    return engine_request(SendEncoded.decode(message))


def engine_request(request: SendEncoded) -> EncodedRequest:
    """The engine's request of a decoded one: its records stay a view of ZeroMQ's buffer (no copy)."""
    try:
        keys = KeyText.unchecked(request.keys, request.key_bounds)
    except ValueError as exc:
        raise schema.SchemaError(str(exc)) from None
    # its key text is checked with the round's batch (``mqstore.engine.put.plan.check``)
    return EncodedRequest(request.records, request.columns, list(request.topics), list(request.tags), keys)


def send_reply(outcome: BatchOutcome, rows: bytes) -> SendEncodedReply:
    status, reason = outcome.failure
    return SendEncodedReply(rows, status.value, reason)


def write_round(state: WriterState, outlets: Outlets, sends: list[EncodedSend]) -> None:
    """A poll round's producer-encoded batches, merged into one batch (up to max_batch_messages
    records) so they take one check, one append and one dispatch; a merged batch that does not
    hold together is taken apart, and only the request at fault is refused."""
    cfg = state.config
    if state.disk.full:
        for send in sends:
            refused = SendEncodedReply(b"", PutStatus.SERVICE_NOT_AVAILABLE.value,
                                       f"disk {state.disk.used_ratio:.0%} used: sends are refused until space returns")
            outlets.reply(send.identity, refused.encode(send.request_id))
        return
    groups: list[list[tuple[bytes, Any, EncodedRequest]]] = [[]]
    rows = 0
    for send in sends:
        try:
            request = engine_request(send.request)
        except schema.SchemaError as exc:
            outlets.reply(send.identity, schema.error_reply(send.request_id, schema.BAD_REQUEST, str(exc)))
            continue
        count = len(request.columns) // COLUMNS.itemsize
        if rows + count > cfg.broker.max_batch_messages and groups[-1]:
            groups.append([])
            rows = 0
        groups[-1].append((send.identity, send.request_id, request))
        rows += count
    for group in groups:
        if len(group) > 1:
            try:
                _append(state, outlets, group, merge([r for _, _, r in group]))
                continue
            except (BatchError, IndexError):
                pass  # one of them is at fault: each alone
        for one in group:
            try:
                _append(state, outlets, [one], one[2])
            except BatchError as exc:
                outlets.reply(one[0], schema.error_reply(one[1], PutStatus.MESSAGE_ILLEGAL.value, str(exc)))


def _append(state: WriterState, outlets: Outlets, group: list[tuple[bytes, Any, EncodedRequest]],
            request: EncodedRequest) -> None:
    """Check, pick queues, append, answer every request of the group; BatchError before any write."""
    cfg = state.config
    queues = state.queues
    checked = check(request, cfg.store, cfg.broker.max_batch_messages)
    queue_ids = pick_queues(request, checked, queues.table, queues.default_queues, queues.round_robin)
    queues.persist()  # a topic made here is on disk before it is answered
    commitlog = state.writer.commitlog
    start = commitlog.max_offset
    outcome = state.writer.write_batch(request.records, checked, request.topics, queue_ids, wall_ms())
    end = commitlog.max_offset
    batch, replies = written_rows(request, checked, queue_ids, outcome)
    counts = [len(one.columns) // COLUMNS.itemsize for _, _, one in group]
    answers: list[Answer] = [(identity, request_id, send_reply(outcome, rows)) for (identity, request_id, _), rows
                             in zip(group, reply_rows_each(replies, counts), strict=True)]
    notice = Dispatch(start, end, batch) if len(outcome.phys_offsets) else None
    answer_round(state, outlets, answers, notice, outcome.store_ms, messages=sum(counts))
