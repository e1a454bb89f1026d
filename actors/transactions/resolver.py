"""END_TRANSACTION, one implementation for every front (RocketMQ's ``EndTransactionProcessor``).

The request names the half message by its commitlog offset and half-queue offset and says COMMIT,
ROLLBACK or UNKNOWN. UNKNOWN changes nothing. Otherwise the half is read back and checked
(``engine.transactions.end_refusal``); a commit puts it on its real topic and queue as a new
record, then both write the op record that resolves the half. Like RocketMQ, an end is not
deduplicated: a second commit of one half stores the message twice (#5574), so producers answer
once per half.

The commit goes out before its op record: a SIGKILL between the two leaves the half unresolved,
and the check service asks the producer again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from actors.transactions.broker import BrokerCalls, own_properties, resend
from engine import transactions as tx
from engine.log.record import Record
from ipc.messages import Outgoing, SendResult

log = logging.getLogger("mqstore")

READ_ATTEMPTS_MS = 3_000  # a half just stored may reach the readers a moment after its producer's answer


@dataclass(frozen=True, slots=True)
class EndRequest:
    group: str
    tran_state_offset: int   # the half's queue offset on the half topic
    commit_log_offset: int   # the half's commitlog offset
    state: tx.TransactionState
    from_check: bool = False


@dataclass(frozen=True, slots=True)
class EndResult:
    ok: bool
    reason: str = ""
    committed: SendResult | None = None


def op_record(half_queue_offsets: list[int]) -> Outgoing:
    """The op ("d") record resolving these halves."""
    return Outgoing(topic=tx.OP_TOPIC, body=tx.op_body(half_queue_offsets), tags=tx.OP_TAG, queue=tx.HALF_QUEUE,
                    properties={tx.PROP_WAIT: "false"})


class Resolver:
    def __init__(self, broker: BrokerCalls, now_ms: Callable[[], int], wait: Callable[[float], None]) -> None:
        self.broker = broker
        self._now_ms = now_ms
        self._wait = wait

    def end(self, request: EndRequest) -> EndResult:
        if request.state is tx.TransactionState.UNKNOWN:
            return EndResult(True, "unknown: the half waits for a check")
        half = self._half(request.commit_log_offset)
        if half is None:
            return EndResult(False, f"no half message at commitlog offset {request.commit_log_offset}")
        if half.topic != tx.HALF_TOPIC:
            return EndResult(False, f"the record at {request.commit_log_offset} is on {half.topic}, not a half message")
        refusal = tx.end_refusal(half.properties, half.queue_offset, half.phys_offset, request.group,
                                 request.tran_state_offset, request.commit_log_offset)
        if refusal is not None:
            return EndResult(False, refusal)
        committed = None
        if request.state is tx.TransactionState.COMMIT:
            committed = self._commit(half)
            if not committed.ok:
                return EndResult(False, f"the commit was not stored: {committed.status} {committed.reason}", committed)
        stored = self.broker.send([op_record([half.queue_offset])])[0]
        if not stored.ok:
            return EndResult(False, f"the op record was not stored: {stored.status} {stored.reason}", committed)
        return EndResult(True, "", committed)

    def _half(self, phys_offset: int) -> Record | None:
        deadline = self._now_ms() + READ_ATTEMPTS_MS
        while True:
            record = self.broker.record_at(phys_offset)
            if record is not None or self._now_ms() >= deadline:
                return record
            self._wait(0.02)

    def _commit(self, half: Record) -> SendResult:
        destination = tx.real_destination(half.properties)
        if destination is None:
            return SendResult("MESSAGE_ILLEGAL", reason="the half message has no REAL_TOPIC / REAL_QID")
        topic, queue_id = destination
        props = own_properties(tx.committed_properties(half.properties))
        message = resend(half, topic=topic, queue=queue_id, properties=props,
                         sys_flag=tx.committed_sys_flag(half.sys_flag) & 0xF, prepared_tx_offset=half.phys_offset)
        return self.broker.send([message])[0]

