"""The writer's side of ``send`` requests (a map per message): one append per poll round.

The round's requests, parsed (``mqstore.actors.writer.ingress``), are appended together with
``CommitLogWriter.write`` (one copy per file) and each answered with one result per message it
sent, in its order: a message refused before the append keeps its refusal, the others get what the
append gave them. Under ASYNC_FLUSH the answers go at once and the batch is dispatched (before the
answers, which a consumer would otherwise wait behind; but a round of one send of one message
answers first); under
SYNC_FLUSH both wait for the flush (``mqstore.actors.writer.sync``); on a SYNC_MASTER the answers also
wait for the copies, the batch does not. While the disk is full every message is
refused as SERVICE_NOT_AVAILABLE and nothing is appended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.actors.clock import wall_ms
from mqstore.actors.writer.outlets import Outlets
from mqstore.actors.writer.state import WriterState
from mqstore.engine.batch.dispatch import DispatchBatch
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.ipc.wire.notices import Dispatch, Written
from mqstore.ipc.wire.replies import SendReply


@dataclass(slots=True)
class MessageSend:
    """A ``send`` request parsed: the messages to append, with their queue ids."""

    identity: bytes
    request_id: Any
    messages: list[Message]
    queue_ids: list[int]
    refused: list[PutResult | None]  # one per message sent: its refusal, or None for one in ``messages``
    # the queue each message in ``messages`` was sent to, which its reply names; a message stored
    # elsewhere (mqstore.engine.put.rewrite) replies with its queue offset there, as RocketMQ's SEND does
    sent_queue_ids: list[int]


def result_fields(r: PutResult, sent_queue_id: int | None = None) -> dict[str, Any]:
    if not r.ok:
        return {"status": r.status.value, "reason": r.reason}
    queue = r.queue_id if sent_queue_id is None else sent_queue_id
    return {"status": r.status.value, "msg_id": r.msg_id, "queue": queue, "queue_offset": r.queue_offset,
            "phys_offset": r.phys_offset, "uniq_key": r.uniq_key}


def write_round(state: WriterState, outlets: Outlets, sends: list[MessageSend]) -> None:
    cfg = state.config
    if state.disk.full:
        reason = (f"disk {state.disk.used_ratio:.0%} used, past {cfg.retention.disk_warning_ratio:.0%}: "
                  "sends are refused until space returns")
        for send in sends:
            fields = [result_fields(r) if r is not None else {"status": PutStatus.SERVICE_NOT_AVAILABLE.value,
                                                               "reason": reason} for r in send.refused]
            outlets.reply(send.identity, SendReply(fields).encode(send.request_id))
        return
    messages = [m for send in sends for m in send.messages]
    queue_ids = [q for send in sends for q in send.queue_ids]
    commitlog = state.writer.commitlog
    start = commitlog.max_offset
    outcome = state.writer.write(messages, queue_ids, wall_ms())
    end = commitlog.max_offset
    if outcome.requests:
        outlets.progress.last_store_ms = outcome.store_ms
    results = iter(outcome.results)
    replies = []
    for send in sends:
        sent = iter(send.sent_queue_ids)
        fields = [result_fields(r) if r is not None else result_fields(next(results), next(sent))
                  for r in send.refused]
        replies.append((send.identity, send.request_id, SendReply(fields)))
    waiters = state.waiters
    if cfg.sync_flush and outcome.requests:
        outlets.written(Written(end, outcome.store_ms, True))
        for identity, request_id, reply in replies:
            waiters.hold(end, identity, request_id, reply)
        waiters.hold_dispatch(Dispatch(start, end, DispatchBatch.from_requests(outcome.requests)))
    else:  # the builders first: a consumer waits on them, a producer only on its answer; but a
        # lone send of one message is answered first, as nothing else in the round waits on the builders' notice
        # and the producer's whole round trip waits on this one reply (the notice follows it by a
        # reply's send, microseconds)
        hold = bool(outcome.requests) and waiters.replicas is not None  # SYNC_MASTER: the answers wait for copies
        answer_first = len(sends) == 1 and len(sends[0].refused) == 1 and not hold  # one send of one message
        if answer_first:
            identity, request_id, reply = replies[0]
            outlets.reply(identity, reply.encode(request_id))
        if outcome.requests:
            notice = Dispatch(start, end, DispatchBatch.from_requests(outcome.requests))
            if waiters.holds_dispatch:  # SYNC_MASTER: visible once the copies hold it
                waiters.hold_dispatch(notice)
            else:
                outlets.dispatch(notice)
            if state.tells_slaves:  # the HA actor pushes what it hears of at once, not a tick later
                outlets.written(Written(end, outcome.store_ms, False))
        if hold:
            for identity, request_id, reply in replies:
                waiters.hold(end, identity, request_id, reply, flush=False)
        elif not answer_first:
            for identity, request_id, reply in replies:
                outlets.reply(identity, reply.encode(request_id))
