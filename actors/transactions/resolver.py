"""END_TRANSACTION, one implementation for every front (RocketMQ's ``EndTransactionProcessor``).

The request names the half message by its commitlog offset and half-queue offset and says COMMIT,
ROLLBACK or UNKNOWN. UNKNOWN changes nothing. Otherwise the half is read back and checked
(``engine.transactions.end_refusal``); a commit puts it on its real topic and queue as a new
record, then both write the op record that resolves the half. Like RocketMQ, an end is not
deduplicated: a second commit of one half stores the message twice (#5574), so producers answer
once per half.

The commits go out before the op record: a SIGKILL between the two leaves the half unresolved,
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
READ_RETRY_S = 0.001


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
        self.read_retries = 0  # halves not yet readable when their end came: the readers learn of a record
                               # once the consume-queue builder applied it, a moment after the producer's answer

    def end(self, requests: list[EndRequest]) -> list[EndResult]:
        """A round's requests together: each half read and checked, the commits put in one send,
        then one op record for every half resolved (5.x's batched op body, "17,18,20,"), so the
        fixed cost of a send is paid once a round, not once a request."""
        results: list[EndResult | None] = [None] * len(requests)
        commits: list[tuple[int, Record, Outgoing]] = []
        resolved: list[tuple[int, Record]] = []
        for n, request in enumerate(requests):
            checked = self._checked(request)
            if isinstance(checked, EndResult):
                results[n] = checked
            elif request.state is tx.TransactionState.COMMIT:
                commits.append((n, checked, self._committed(checked)))
            else:
                resolved.append((n, checked))
        stored = self.broker.send([c[2] for c in commits]) if commits else []
        for (n, half, _), result in zip(commits, stored, strict=True):
            if result.ok:
                resolved.append((n, half))
            else:
                results[n] = EndResult(False, f"the commit was not stored: {result.status} {result.reason}", result)
        if resolved:
            committed = dict(zip((c[0] for c in commits), stored, strict=True))
            op = self.broker.send([op_record(sorted({half.queue_offset for _, half in resolved}))])[0]
            for n, _ in resolved:
                results[n] = EndResult(op.ok, "" if op.ok else f"the op record was not stored: {op.status} {op.reason}",
                                       committed.get(n))
        return [r if r is not None else EndResult(False, "not resolved") for r in results]

    def _checked(self, request: EndRequest) -> Record | EndResult:
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
        if request.state is tx.TransactionState.COMMIT and tx.real_destination(half.properties) is None:
            return EndResult(False, "the half message has no REAL_TOPIC / REAL_QID")
        return half

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
        return resend(half, topic=topic, queue=queue_id, properties=props,
                      sys_flag=tx.committed_sys_flag(half.sys_flag) & 0xF, prepared_tx_offset=half.phys_offset)
