"""The check service's walk against a broker stand-in: check immunity (copies that keep naming the
first half, looked up among every half the op records resolve), the age past which halves are
discarded, and the end and resume rules around them."""

from __future__ import annotations

from collections.abc import Sequence

from mqstore.actors.transactions.checker import Checker, CheckSettings
from mqstore.actors.transactions.resolver import ILLEGAL_OPERATION, EndRequest, Resolver
from mqstore.engine.log.host import Host
from mqstore.engine.log.message import PutStatus
from mqstore.engine.log.record import Record, decode_record, encode_record
from mqstore.engine.put import transactions as tx
from mqstore.ipc.wire.messages import Outgoing, SendResult

HOST = Host("127.0.0.1", 10911)
NOW = 1_700_000_000_000
TIMEOUT = 6_000
SETTINGS = CheckSettings(timeout_ms=TIMEOUT, check_max=15, reserved_ms=72 * 3_600_000)


def record(topic: str, queue_offset: int, born_ms: int, props: dict[str, str], body: bytes = b"b",
           store_ms: int | None = None) -> Record:
    raw = encode_record(topic=topic, body=body, properties=props, born_host=HOST, store_host=HOST,
                        queue_offset=queue_offset, phys_offset=1000 * (queue_offset + 1), born_ms=born_ms,
                        store_ms=born_ms if store_ms is None else store_ms)
    decoded = decode_record(bytes(raw), 0, check_crc=False).record
    assert decoded is not None
    return decoded


def half_props(uniq: str, **more: str) -> dict[str, str]:
    return {"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": uniq, "REAL_TOPIC": "Orders", "REAL_QID": "1", **more}


class Queues:
    """The half, op and discard queues, each queue 0, and the CID_RMQ_SYS_TRANS offsets."""

    def __init__(self, halves: Sequence[Record], ops: Sequence[list[int]] = (), half_offset: int = 0) -> None:
        self.queues: dict[str, list[Record]] = {tx.HALF_TOPIC: list(halves), tx.OP_TOPIC: [],
                                                tx.CHECK_MAX_TOPIC: []}
        for resolved in ops:
            self._append(tx.OP_TOPIC, tx.op_body(resolved), {"TAGS": tx.OP_TAG}, NOW)
        self.offsets = {tx.HALF_TOPIC: half_offset, tx.OP_TOPIC: 0}

    def _append(self, topic: str, body: bytes, props: dict[str, str], born_ms: int) -> SendResult:
        queue = self.queues[topic]
        queue.append(record(topic, len(queue), born_ms, props, body, store_ms=NOW + 1))
        return SendResult(PutStatus.PUT_OK, "ID", 0, len(queue) - 1, 1000 * len(queue))

    def span(self, topic: str, queue_id: int = 0) -> tuple[int, int]:
        return 0, len(self.queues[topic])

    def pull(self, topic: str, queue_offset: int, count: int = 32) -> list[Record]:
        return self.queues[topic][queue_offset:queue_offset + count]

    def offset(self, topic: str) -> int:
        return self.offsets[topic]

    def commit_offset(self, topic: str, queue_offset: int) -> None:
        self.offsets[topic] = queue_offset

    def send(self, messages: Sequence[Outgoing]) -> list[SendResult]:
        return [self._append(m.topic, m.body, dict(m.properties), m.born_ms or NOW) for m in messages]

    def record_at(self, phys_offset: int) -> Record | None:
        return next((r for q in self.queues.values() for r in q if r.phys_offset == phys_offset), None)


def run(queues: Queues) -> list[dict[str, object]]:
    asked: list[dict[str, object]] = []
    checker = Checker(queues, SETTINGS, lambda: NOW, lambda group, push: asked.append(push) or True)  # type: ignore[arg-type]
    checker.run()
    return asked


def test_an_immune_half_is_copied_naming_itself_and_a_copy_of_a_copy_keeps_the_first() -> None:
    queues = Queues([record(tx.HALF_TOPIC, 0, NOW - 1_000, half_props("U0", CHECK_IMMUNITY_TIME_IN_SECONDS="60"))])
    assert run(queues) == []
    copy = queues.queues[tx.HALF_TOPIC][1]
    assert copy.properties[tx.PROP_PREPARED_QUEUE_OFFSET] == "0" and copy.born_ms == NOW - 1_000
    assert tx.PROP_CHECK_TIMES not in copy.properties and queues.offsets[tx.HALF_TOPIC] == 1
    queues.queues[tx.HALF_TOPIC][1] = record(tx.HALF_TOPIC, 1, NOW - 1_000, dict(copy.properties))  # stored before
    assert run(queues) == []
    assert queues.queues[tx.HALF_TOPIC][2].properties[tx.PROP_PREPARED_QUEUE_OFFSET] == "0"


def test_a_copy_whose_first_half_an_op_record_resolves_is_passed_even_below_the_walks_start() -> None:
    first = record(tx.HALF_TOPIC, 0, NOW - 1_000, half_props("U0", CHECK_IMMUNITY_TIME_IN_SECONDS="60"))
    copy = record(tx.HALF_TOPIC, 1, NOW - 1_000, {**first.properties, tx.PROP_PREPARED_QUEUE_OFFSET: "0"})
    checked_copy = record(tx.HALF_TOPIC, 2, NOW - 100_000, {**copy.properties, tx.PROP_CHECK_TIMES: "1"})
    queues = Queues([first, copy, checked_copy], ops=[[0]], half_offset=1)  # RocketMQ's op map would miss 0
    assert run(queues) == []
    assert len(queues.queues[tx.HALF_TOPIC]) == 3 and queues.offsets[tx.HALF_TOPIC] == 3


def test_the_check_service_takes_the_immunity_as_given_and_stops_at_a_young_half_without_one() -> None:
    short = record(tx.HALF_TOPIC, 0, NOW - 2_000, half_props("U0", CHECK_IMMUNITY_TIME_IN_SECONDS="1"))
    young = record(tx.HALF_TOPIC, 1, NOW - 2_000, half_props("U1"))
    queues = Queues([short, young])
    (asked,) = run(queues)  # 2 s is past 1 s of immunity (END would raise it to the 6 s timeout)
    assert asked["msg_id"] == "U0" and queues.offsets[tx.HALF_TOPIC] == 1  # the walk stopped at the young one
    nonsense = record(tx.HALF_TOPIC, 0, NOW - 2_000, half_props("U2", CHECK_IMMUNITY_TIME_IN_SECONDS="soon"))
    assert run(Queues([nonsense])) == []  # no number: the timeout, and 2 s is within it


def test_halves_older_than_the_commitlog_retention_are_discarded() -> None:
    old = record(tx.HALF_TOPIC, 0, NOW - SETTINGS.reserved_ms - 1, half_props("U0"))
    queues = Queues([old, record(tx.HALF_TOPIC, 1, NOW - SETTINGS.reserved_ms + 60_000, half_props("U1"))])
    (asked,) = run(queues)
    assert asked["msg_id"] == "U1"
    assert [r.properties["UNIQ_KEY"] for r in queues.queues[tx.CHECK_MAX_TOPIC]] == ["U0"]


def test_a_producers_own_end_past_the_immunity_is_illegal_and_a_checks_answer_is_not() -> None:
    half = record(tx.HALF_TOPIC, 0, NOW - 10_000, half_props("U0", CHECK_IMMUNITY_TIME_IN_SECONDS="1"))
    queues = Queues([half])
    resolver = Resolver(queues, lambda: NOW, lambda s: None, TIMEOUT)  # type: ignore[arg-type]
    late = EndRequest("pg", 0, half.phys_offset, tx.TransactionState.ROLLBACK)
    (refused,) = resolver.end([late])
    assert not refused.ok and refused.status == ILLEGAL_OPERATION and queues.queues[tx.OP_TOPIC] == []
    (answered,) = resolver.end([EndRequest("pg", 0, half.phys_offset, tx.TransactionState.ROLLBACK, from_check=True)])
    assert answered.ok
    raised = record(tx.HALF_TOPIC, 0, NOW - 5_000, half_props("U1", CHECK_IMMUNITY_TIME_IN_SECONDS="1"))
    assert tx.end_too_late(raised.properties, raised.born_ms, NOW, TIMEOUT, from_check=False) is None  # 1 s -> 6 s


def test_resume_puts_a_discarded_half_back_with_its_count_at_zero_and_refuses_anything_else() -> None:
    queues = Queues([record(tx.HALF_TOPIC, 0, NOW, half_props("U0"))])
    discarded = record(tx.CHECK_MAX_TOPIC, 7, NOW, half_props("U9", TRANSACTION_CHECK_TIMES="15"))
    queues.queues[tx.CHECK_MAX_TOPIC].append(discarded)
    resolver = Resolver(queues, lambda: NOW, lambda s: None, TIMEOUT)  # type: ignore[arg-type]
    assert not resolver.resume(1000).ok  # a half, not a discarded one
    assert not resolver.resume(5).ok     # nothing there
    resumed = resolver.resume(8000)
    assert resumed.ok and resumed.committed is not None
    back = queues.queues[tx.HALF_TOPIC][-1]
    assert back.properties["UNIQ_KEY"] == "U9" and back.properties[tx.PROP_CHECK_TIMES] == "0"
