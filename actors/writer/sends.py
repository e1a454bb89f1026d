"""The writer's side of ``send`` requests (a map per message): one append per poll round.

The round's requests, parsed (``mqstore.actors.writer.ingress``), are appended together with
``CommitLogWriter.write`` (one copy per file) and each answered with one result per message it
sent, in its order: a message refused before the append keeps its refusal, the others get what the
append gave them. The answers and the batch's dispatch go out, or wait for the flush or the copies,
as ``mqstore.actors.writer.answers`` has it for every kind of send. While the disk is full every
message is refused as SERVICE_NOT_AVAILABLE and nothing is appended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.actors.clock import wall_ms
from mqstore.actors.writer.answers import Answer, answer_round
from mqstore.actors.writer.outlets import Outlets
from mqstore.actors.writer.state import WriterState
from mqstore.engine.batch.dispatch import DispatchBatch
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.ipc.wire.notices import Dispatch
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
    results = iter(outcome.results)
    answers: list[Answer] = []
    for send in sends:
        sent = iter(send.sent_queue_ids)
        fields = [result_fields(r) if r is not None else result_fields(next(results), next(sent))
                  for r in send.refused]
        answers.append((send.identity, send.request_id, SendReply(fields)))
    notice = Dispatch(start, end, DispatchBatch.from_requests(outcome.requests)) if outcome.requests else None
    answer_round(state, outlets, answers, notice, outcome.store_ms, messages=sum(len(s.refused) for s in sends))
