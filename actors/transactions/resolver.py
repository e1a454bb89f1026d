"""END_TRANSACTION, one implementation for every front (RocketMQ's ``EndTransactionProcessor``).

The request names the half message by its commitlog offset and half-queue offset and says COMMIT,
ROLLBACK or UNKNOWN. UNKNOWN changes nothing. Otherwise the half is read back and checked: a
producer's own end of a half past its check immunity is refused with ILLEGAL_OPERATION
(``mqstore.engine.put.transactions.end_too_late``), one that does not match the half it names with
END_TRANSACTION_FAILED (``mqstore.engine.put.transactions.end_refusal``); a commit puts it on its real topic and queue
as a new
record, and both write the op record that resolves the half. Like RocketMQ, an end is not
deduplicated: a second commit of one half stores the message twice (#5574), so producers answer
once per half.

The commits go out before the op record, in the same append: a SIGKILL that cuts the append
between them leaves the half unresolved, and the check service asks the producer again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from mqstore.actors.transactions.broker import BrokerCalls, own_properties, resend
from mqstore.engine.log.record import Record
from mqstore.engine.put import transactions as tx
from mqstore.ipc.wire.messages import Outgoing, SendResult

log = logging.getLogger("mqstore")

READ_ATTEMPTS_MS = 3_000  # a half just stored may reach the readers a moment after its producer's answer
READ_RETRY_S = 0.001
ILLEGAL_OPERATION = "ILLEGAL_OPERATION"  # RocketMQ's 604: too late, the half waits for a check


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
    status: str = ""   # why it was refused, when it is not the end's mismatch (ILLEGAL_OPERATION)


def op_record(half_queue_offsets: list[int]) -> Outgoing:
    """The op ("d") record resolving these halves."""
    return Outgoing(topic=tx.OP_TOPIC, body=tx.op_body(half_queue_offsets), tags=tx.OP_TAG, queue_id=tx.HALF_QUEUE,
                    properties={tx.PROP_WAIT: "false"})


class Resolver:
    def __init__(self, broker: BrokerCalls, now_ms: Callable[[], int], wait: Callable[[float], None],
                 timeout_ms: int = 6_000) -> None:
        self.broker = broker
        self.timeout_ms = timeout_ms  # [broker] transaction_timeout_ms: the least check immunity
        self._now_ms = now_ms
        self._wait = wait
        self.read_retries = 0  # halves not yet readable when their end came: the readers learn of a record
                               # once the consume-queue builder applied it, a moment after the producer's answer

    def end(self, requests: list[EndRequest]) -> list[EndResult]:
        """A round's requests together, in one send: each half read and checked, the commits, then one
        op record for every half ended (5.x's batched op body, "17,18,20,"). The writer appends a
        request's records in order and stops at a failed append, so the op record is stored only
        after every commit before it was. A commit the writer refuses on its own (its topic gone)
        while the op record went in has its half re-appended to the half queue, unresolved: the
        check service asks its producer again, as RocketMQ's would for a commit that failed."""
        results: list[EndResult | None] = [None] * len(requests)
        ended: list[tuple[int, Record, Outgoing | None]] = []
        for n, request in enumerate(requests):
            checked = self._checked(request)
            if isinstance(checked, EndResult):
                results[n] = checked
            else:
                commit = self._committed(checked) if request.state is tx.TransactionState.COMMIT else None
                ended.append((n, checked, commit))
        if not ended:
            return [r for r in results if r is not None]
        commits = [(n, half, commit) for n, half, commit in ended if commit is not None]
        op = op_record(sorted({half.queue_offset for _, half, _ in ended}))
        stored = self.broker.send([commit for _, _, commit in commits] + [op])
        committed = {n: result for (n, _, _), result in zip(commits, stored, strict=False)}
        op_stored = stored[-1]
        again = [half for n, half, _ in commits if not committed[n].ok]
        if op_stored.ok and again:
            log.warning("transactions: %d commit(s) refused; their halves wait for a check", len(again))
            self.broker.send([resend(half, queue_id=tx.HALF_QUEUE) for half in again])
        for n, _, _ in ended:
            result = committed.get(n)
            if result is not None and not result.ok:
                results[n] = EndResult(False, f"the commit was not stored: {result.status} {result.reason}", result)
            elif not op_stored.ok:
                results[n] = EndResult(False, f"the op record was not stored: {op_stored.status} {op_stored.reason}",
                                       result)
            else:
                results[n] = EndResult(True, "", result)
        return [r if r is not None else EndResult(False, "not resolved") for r in results]

    def _checked(self, request: EndRequest) -> Record | EndResult:
        if request.state is tx.TransactionState.UNKNOWN:
            return EndResult(True, "unknown: the half waits for a check")
        half = self._half(request.commit_log_offset)
        if half is None:
            return EndResult(False, f"no half message at commitlog offset {request.commit_log_offset}")
        if half.topic != tx.HALF_TOPIC:
            return EndResult(False, f"the record at {request.commit_log_offset} is on {half.topic}, not a half message")
        late = tx.end_too_late(half.properties, half.born_ms, self._now_ms(), self.timeout_ms, request.from_check)
        if late is not None:
            return EndResult(False, late, status=ILLEGAL_OPERATION)
        refusal = tx.end_refusal(half.properties, half.queue_offset, half.phys_offset, request.group,
                                 request.tran_state_offset, request.commit_log_offset)
        if refusal is not None:
            return EndResult(False, refusal)
        if request.state is tx.TransactionState.COMMIT and tx.real_destination(half.properties) is None:
            return EndResult(False, "the half message has no REAL_TOPIC / REAL_QID")
        return half

    def resume(self, phys_offset: int) -> EndResult:
        """RESUME_CHECK_HALF_MESSAGE: the half discarded to ``TRANS_CHECK_MAX_TIME_TOPIC`` at this
        commitlog offset is put back on the half queue with its check count at 0 (RocketMQ's
        AdminBrokerProcessor). Only a discarded half: any other record would become a transaction."""
        record = self.broker.record_at(phys_offset)
        if record is None:
            return EndResult(False, f"no message at commitlog offset {phys_offset}")
        if record.topic != tx.CHECK_MAX_TOPIC:
            return EndResult(False, f"the record at {phys_offset} is on {record.topic}, not {tx.CHECK_MAX_TOPIC}")
        props = own_properties(tx.resumed_properties(record.properties))
        (copy,) = self.broker.send([resend(record, topic=tx.HALF_TOPIC, queue_id=tx.HALF_QUEUE, properties=props)])
        if not copy.ok:
            return EndResult(False, f"Put message back to {tx.HALF_TOPIC} failed: {copy.status} {copy.reason}", copy)
        return EndResult(True, "", copy)

    def _half(self, phys_offset: int) -> Record | None:
        deadline = self._now_ms() + READ_ATTEMPTS_MS
        while True:
            record = self.broker.record_at(phys_offset)
            if record is not None or self._now_ms() >= deadline:
                return record
            self.read_retries += 1
            self._wait(READ_RETRY_S)

    @staticmethod
    def _committed(half: Record) -> Outgoing:
        topic, queue_id = tx.real_destination(half.properties) or (half.topic, half.queue_id)
        props = own_properties(tx.committed_properties(half.properties))
        return resend(half, topic=topic, queue_id=queue_id, properties=props,
                      sys_flag=tx.committed_sys_flag(half.sys_flag) & 0xF, prepared_tx_offset=half.phys_offset)
