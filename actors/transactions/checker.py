"""RocketMQ's transaction check service (``TransactionalMessageServiceImpl#check``), one run at a time.

A run reads the op records from the op queue's offset of ``CID_RMQ_SYS_TRANS`` and notes every
half they resolve, then walks the half queue from its offset. A resolved half is passed over. An
unresolved one is discarded to ``TRANS_CHECK_MAX_TIME_TOPIC`` once it was checked
``check_max`` times or was born longer ago than the commitlog's retention (``reserved_ms``); the
walk stops at a half stored after the run began; ages are from the half's birth, as RocketMQ's.
A half with ``CHECK_IMMUNITY_TIME_IN_SECONDS`` younger than its immunity is passed over once an op
record resolves the first half it copies (``TRAN_PREPARED_QUEUE_OFFSET``), else re-appended with
that offset; without the property the walk stops at a half younger than ``timeout_ms``. Any other
is re-appended with its check count one up and its producer is asked about the copy (``ask``).
Then both offsets move: the half offset to where the walk stopped, the op offset over the op
records that resolve nothing at or after it.

Unlike RocketMQ, whose op map holds only halves at or past the walk's start, an immunity copy (or a
checked copy of one) is looked up among every half the op records read this run resolve: a commit
of its first half that came after the copy was made is found, and the producer is not asked again
about a transaction it ended (which would commit it twice).

What a SIGKILL costs: the offsets are committed at the end of a run (and persisted by reader 0 on
its cadence), so a run cut short is walked again: a half may be re-appended and checked twice, and
producers answer checks idempotently, as RocketMQ's must (#1517).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from mqstore.actors.transactions.broker import BrokerCalls, own_properties, resend
from mqstore.engine.log.record import PROP_CRC_KEY, PROP_UNIQ_KEY, Record, encode_record
from mqstore.engine.put import transactions as tx
from mqstore.ipc.wire.messages import SendResult

log = logging.getLogger("mqstore")

MAX_RUN_MS = 60_000           # RocketMQ's MAX_PROCESS_TIME_LIMIT
MAX_OP_RECORDS = 4_096        # op records read per run


@dataclass(frozen=True, slots=True)
class CheckSettings:
    timeout_ms: int
    check_max: int
    reserved_ms: int = 72 * 3_600_000   # the commitlog's file_reserved_hours: older halves are discarded


@dataclass(slots=True)
class CheckRun:
    checked: int = 0
    discarded: int = 0
    passed: int = 0           # resolved halves walked over
    immune: int = 0           # immune halves re-appended


Ask = Callable[[str, dict[str, object]], bool]


class Checker:
    def __init__(self, broker: BrokerCalls, settings: CheckSettings, now_ms: Callable[[], int], ask: Ask) -> None:
        self.broker = broker
        self.settings = settings
        self._now_ms = now_ms
        self._ask = ask

    def run(self) -> CheckRun:
        outcome = CheckRun()
        half_min, half_max = self.broker.span(tx.HALF_TOPIC)
        if half_max <= half_min:
            return outcome
        start_ms = self._now_ms()
        half_offset = self._start(tx.HALF_TOPIC, half_min)
        op_offset = self._start(tx.OP_TOPIC, self.broker.span(tx.OP_TOPIC)[0])
        ops = self._ops(op_offset)
        listed = {h for _, halves in ops for h in halves}
        resolved = {h for h in listed if h >= half_offset}
        i = half_offset
        batch: dict[int, Record] = {}
        while i < half_max and self._now_ms() - start_ms < MAX_RUN_MS:
            if i in resolved:
                outcome.passed += 1
                i += 1
                continue
            if i not in batch:
                batch = {r.queue_offset: r for r in self.broker.pull(tx.HALF_TOPIC, i)}
                if i not in batch:
                    break  # not readable yet (or gone): the next run starts here
            half = batch[i]
            age_ms = start_ms - half.born_ms
            if tx.check_times(half.properties) >= self.settings.check_max or age_ms > self.settings.reserved_ms:
                if not self._discard(half):
                    break
                outcome.discarded += 1
                i += 1
                continue
            if half.store_ms >= start_ms:
                break
            first = tx.prepared_queue_offset(half.properties)
            if first is not None and first in listed:
                outcome.passed += 1  # its first half was ended after this copy was made
                i += 1
                continue
            immunity = tx.check_immunity_ms(half.properties, self.settings.timeout_ms)
            if immunity is not None and age_ms < immunity:
                if tx.PROP_PREPARED_QUEUE_OFFSET in half.properties and first is None:
                    break  # RocketMQ's getLong gave -1: no copy, no check; the next run looks again
                if self._reappend(half, tx.immunity_copy_properties(half.properties, half.queue_offset)) is None:
                    break
                outcome.immune += 1
                i += 1
                continue
            if immunity is None and 0 <= age_ms <= self.settings.timeout_ms:
                break
            if not self._check(half):
                break
            outcome.checked += 1
            i += 1
        if i != half_offset:
            self.broker.commit_offset(tx.HALF_TOPIC, i)
        done = op_offset
        for op_queue_offset, halves in ops:
            if op_queue_offset != done or any(h >= i for h in halves):
                break
            done += 1
        if done != op_offset:
            self.broker.commit_offset(tx.OP_TOPIC, done)
        return outcome

    def _start(self, topic: str, low: int) -> int:
        committed = self.broker.offset(topic)
        return committed if committed >= low else low

    def _ops(self, op_offset: int) -> list[tuple[int, list[int]]]:
        ops: list[tuple[int, list[int]]] = []
        _, op_max = self.broker.span(tx.OP_TOPIC)
        at = op_offset
        while at < op_max and len(ops) < MAX_OP_RECORDS:
            records = self.broker.pull(tx.OP_TOPIC, at)
            if not records:
                break
            for record in records:
                ops.append((record.queue_offset, tx.parse_op_body(record.body) if record.tags == tx.OP_TAG else []))
            at = records[-1].queue_offset + 1
        return ops

    def _discard(self, half: Record) -> bool:
        result = self.broker.send([resend(half, topic=tx.CHECK_MAX_TOPIC, queue_id=0)])[0]
        if not result.ok:
            log.warning("transactions: discarding half %d failed: %s %s", half.queue_offset, result.status,
                        result.reason)
        return result.ok

    def _check(self, half: Record) -> bool:
        props = tx.checked_properties(half.properties)
        copy = self._reappend(half, props)
        if copy is None:
            return False
        group = half.properties.get(tx.PROP_PGROUP, "")
        self._ask(group, check_push(half, props, copy))
        return True

    def _reappend(self, half: Record, props: dict[str, str]) -> SendResult | None:
        copy = self.broker.send([resend(half, topic=tx.HALF_TOPIC, queue_id=tx.HALF_QUEUE,
                                        properties=own_properties(props))])[0]
        if not copy.ok:
            log.warning("transactions: re-appending half %d failed: %s %s", half.queue_offset, copy.status,
                        copy.reason)
            return None
        return copy


def check_push(half: Record, props: dict[str, str], copy: SendResult) -> dict[str, object]:
    """The ``check_transaction`` push about a re-appended half: its offsets and ids, and the message
    as RocketMQ's CHECK_TRANSACTION_STATE body carries it (the v1 record layout, the real topic and
    queue, the current properties)."""
    real = tx.real_destination(props) or (half.topic, half.queue_id)
    uniq = props.get(PROP_UNIQ_KEY, "")
    record = encode_record(topic=real[0], body=half.body, queue_id=real[1], flag=half.flag, sys_flag=half.sys_flag,
                           properties={k: v for k, v in props.items() if k != PROP_CRC_KEY}, born_ms=half.born_ms,
                           born_host=half.born_host, store_host=half.store_host, store_ms=half.store_ms,
                           queue_offset=copy.queue_offset, phys_offset=copy.phys_offset,
                           reconsume_times=half.reconsume_times)
    return {"v": 1, "push": "check_transaction", "group": props.get(tx.PROP_PGROUP, ""), "topic": tx.HALF_TOPIC,
            "queue_offset": copy.queue_offset, "phys_offset": copy.phys_offset, "msg_id": uniq,
            "transaction_id": props.get(tx.PROP_TRANSACTION_ID, uniq), "offset_msg_id": copy.msg_id,
            "record": bytes(record)}
