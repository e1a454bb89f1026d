"""Transactional messages, RocketMQ's way: the names, the half-message rule on put, the op records'
body, and what END_TRANSACTION and the check service make of a stored half message.

A producer sends a *half* message (property ``TRAN_MSG=true``, or sysFlag TRANSACTION_PREPARED 4),
which the writer stores on ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 (``half_message_rule``, one of
``mqstore.engine.put.rewrite``'s rules) with its real topic and queue in ``REAL_TOPIC`` / ``REAL_QID`` and
``__transactionId__`` = its ``UNIQ_KEY``; its transaction bits are reset to NOT_TYPE so the half
queue indexes it, and a ``DELAY`` is dropped (RocketMQ issue #1540: a delayed half looped through
every check). Consumers of the real topic never see it.

A commit re-puts it on its real topic as a new record (sysFlag COMMIT 8, ``WAIT=false``, the
half's commitlog offset in the record's PREPARED TX OFFSET field; ``REAL_TOPIC``, ``REAL_QID`` and
``TRAN_MSG`` stay in the stored properties, as RocketMQ serialises them before removing them).
Commit and rollback both write an *op* record on ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0, tag
``d``, whose body is the resolved half-queue offsets as UTF-8 text, each followed by a comma::

    17,18,20,

The check service re-appends an unresolved half (``TRANSACTION_CHECK_TIMES`` counted up) before it
asks the producer, and past ``transaction_check_max`` checks, or once it is older than the
commitlog's retention (``file_reserved_hours``), moves it to ``TRANS_CHECK_MAX_TIME_TOPIC``
unchanged. RESUME_CHECK_HALF_MESSAGE puts such a message back on the half queue with its count at 0.
Its progress is the consumer offsets of group ``CID_RMQ_SYS_TRANS`` on the half and op queues.

A half carrying ``CHECK_IMMUNITY_TIME_IN_SECONDS`` is not checked before that many seconds from its
birth: the check service re-appends it meanwhile with ``TRAN_PREPARED_QUEUE_OFFSET`` naming the
first half's queue offset, which an op record may resolve. RocketMQ reads the property two ways,
and so does this module: the check service takes the seconds as given (``check_immunity_ms``; the
timeout where they are no number), END_TRANSACTION raises them to the timeout at least
(``end_immunity_ms``) and refuses, ILLEGAL_OPERATION, an end that is not a check's answer and came
later than that.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import replace

from mqstore.engine.config import StoreConfig
from mqstore.engine.java.numbers import parse_long
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.log.record import (
    PROP_DELAY,
    PROP_UNIQ_KEY,
    SYSFLAG_TX_COMMIT,
    SYSFLAG_TX_MASK,
    SYSFLAG_TX_PREPARED,
    SYSFLAG_TX_ROLLBACK,
)

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYSTEM_TOPICS = frozenset({HALF_TOPIC, OP_TOPIC, CHECK_MAX_TOPIC})
CHECK_GROUP = "CID_RMQ_SYS_TRANS"
HALF_QUEUE = 0
OP_TAG = "d"

PROP_TRAN_MSG = "TRAN_MSG"
PROP_PGROUP = "PGROUP"
PROP_TRANSACTION_ID = "__transactionId__"
PROP_REAL_TOPIC = "REAL_TOPIC"
PROP_REAL_QID = "REAL_QID"
PROP_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROP_WAIT = "WAIT"
PROP_CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROP_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"


class TransactionState(enum.IntEnum):
    """END_TRANSACTION's ``commitOrRollback``: RocketMQ's transaction sysFlag values."""

    UNKNOWN = 0
    COMMIT = SYSFLAG_TX_COMMIT
    ROLLBACK = SYSFLAG_TX_ROLLBACK


def is_prepare(properties: Mapping[str, str], sys_flag: int) -> bool:
    """Whether a send is a transaction's half message (Java's ``Boolean.parseBoolean(TRAN_MSG)``)."""
    return properties.get(PROP_TRAN_MSG, "").lower() == "true" or sys_flag & SYSFLAG_TX_MASK == SYSFLAG_TX_PREPARED


def half_message_rule(message: Message, queue_id: int, config: StoreConfig) -> tuple[Message, int] | PutResult | None:
    """A prepare goes to the half topic's queue 0; a record the transaction actor puts (a commit, a
    half re-appended for a check, a discard: on a system topic or with COMMIT bits) is left as is."""
    tx_bits = message.sys_flag & SYSFLAG_TX_MASK
    if message.topic in SYSTEM_TOPICS or tx_bits not in (0, SYSFLAG_TX_PREPARED):
        return None
    props = message.properties
    if not is_prepare(props, message.sys_flag):
        return None
    uniq_key = props.get(PROP_UNIQ_KEY)
    if not uniq_key or not props.get(PROP_PGROUP):
        return PutResult(PutStatus.MESSAGE_ILLEGAL, reason="a transaction's half message carries its UNIQ_KEY "
                                                           "and its producer group (PGROUP)")
    half = {k: v for k, v in props.items() if k != PROP_DELAY}
    half.update({PROP_TRAN_MSG: "true", PROP_TRANSACTION_ID: uniq_key, PROP_REAL_TOPIC: message.topic,
                 PROP_REAL_QID: str(queue_id)})
    return replace(message, topic=HALF_TOPIC, properties=half, sys_flag=message.sys_flag & ~SYSFLAG_TX_MASK), HALF_QUEUE


def end_refusal(half_properties: Mapping[str, str], half_queue_offset: int, half_phys_offset: int,
                group: str, tran_state_offset: int, commit_log_offset: int) -> str | None:
    """RocketMQ's ``checkPrepareMessage``: why an END_TRANSACTION does not match the half it names."""
    if half_properties.get(PROP_PGROUP) != group:
        return f"the producer group {group!r} is not the half message's ({half_properties.get(PROP_PGROUP)!r})"
    if half_queue_offset != tran_state_offset:
        return f"tranStateTableOffset {tran_state_offset} is not the half message's queue offset {half_queue_offset}"
    if half_phys_offset != commit_log_offset:
        return f"commitLogOffset {commit_log_offset} is not the half message's {half_phys_offset}"
    return None


def end_immunity_ms(half_properties: Mapping[str, str], timeout_ms: int) -> int | None:
    """END_TRANSACTION's immunity (RocketMQ's ``TransactionalMessageUtil.getImmunityTime``): the
    property's seconds in ms, raised to the timeout; None without the property (or with it empty)."""
    raw = half_properties.get(PROP_CHECK_IMMUNITY)
    if not raw:
        return None
    return max((parse_long(raw) or 0) * 1000, timeout_ms)


def end_too_late(half_properties: Mapping[str, str], half_born_ms: int, now_ms: int, timeout_ms: int,
                 from_check: bool) -> str | None:
    """RocketMQ's ``rejectCommitOrRollback``: why a producer's own end (not a check's answer) of an
    immune half comes too late, or None."""
    immunity = end_immunity_ms(half_properties, timeout_ms)
    if from_check or immunity is None or now_ms - half_born_ms <= immunity:
        return None
    return (f"the half was born {now_ms - half_born_ms} ms ago, past its check immunity of {immunity} ms: "
            "it waits for a check")


def check_immunity_ms(half_properties: Mapping[str, str], timeout_ms: int) -> int | None:
    """The check service's immunity (``TransactionalMessageServiceImpl.getImmunityTime``): the seconds
    as given, in ms, not raised to the timeout; the timeout where they are no number (or -1); None
    without the property."""
    raw = half_properties.get(PROP_CHECK_IMMUNITY)
    if raw is None:
        return None
    seconds = parse_long(raw)
    return timeout_ms if seconds is None or seconds == -1 else seconds * 1000


def prepared_queue_offset(half_properties: Mapping[str, str]) -> int | None:
    """The first half's queue offset an immunity copy carries; None on a first half (or a bad value)."""
    raw = half_properties.get(PROP_PREPARED_QUEUE_OFFSET)
    value = parse_long(raw) if raw is not None else None
    return value if value is not None and value >= 0 else None


def immunity_copy_properties(half_properties: Mapping[str, str], half_queue_offset: int) -> dict[str, str]:
    """A half re-appended while immune: it keeps naming the first half's queue offset."""
    first = half_properties.get(PROP_PREPARED_QUEUE_OFFSET) or str(half_queue_offset)
    return {**half_properties, PROP_PREPARED_QUEUE_OFFSET: first}


def resumed_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """A discarded half put back by RESUME_CHECK_HALF_MESSAGE: its check count at 0."""
    return {**properties, PROP_CHECK_TIMES: "0"}


def real_destination(half_properties: Mapping[str, str]) -> tuple[str, int] | None:
    """The topic and queue a half message was sent to, or None when its properties do not say."""
    topic, qid = half_properties.get(PROP_REAL_TOPIC), half_properties.get(PROP_REAL_QID, "")
    if not topic or not qid.isdigit():
        return None
    return topic, int(qid)


def committed_properties(half_properties: Mapping[str, str]) -> dict[str, str]:
    """The committed record's properties: the half's, with ``WAIT=false``."""
    return {**half_properties, PROP_WAIT: "false"}


def committed_sys_flag(half_sys_flag: int) -> int:
    return (half_sys_flag & ~SYSFLAG_TX_MASK) | SYSFLAG_TX_COMMIT


def check_times(properties: Mapping[str, str]) -> int:
    raw = properties.get(PROP_CHECK_TIMES, "0")
    return int(raw) if raw.isdigit() else 0


def checked_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """A half re-appended for a check: its check count one up (1 when it had none)."""
    return {**properties, PROP_CHECK_TIMES: str(check_times(properties) + 1)}


def op_body(half_queue_offsets: Iterable[int]) -> bytes:
    """An op record's body: each resolved half-queue offset followed by a comma."""
    return "".join(f"{offset}," for offset in half_queue_offsets).encode()


def parse_op_body(body: bytes) -> list[int]:
    """The half-queue offsets an op body lists (4.x's bare offset too); pieces that are not
    offsets are skipped, as RocketMQ skips them."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return []
    pieces = (piece.strip() for piece in text.split(","))
    # isdecimal, not isdigit: int() refuses a superscript digit, and strip() takes separators int() keeps
    return [int(piece) for piece in pieces if piece.isdecimal()]
