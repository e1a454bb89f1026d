"""Whether the commitlog record at a timerlog record's offset is the timer message it names.

A timerlog record says only where its message is (commitlog offset and size). The timerlog is a
mapping the kernel may write back before the commitlog bytes it points at reach the disk, so after a
power cut a record can name an offset past the recovered commitlog end, which the writer fills again
with other records. Reading a message back (recovery, delivery) therefore checks that the record
there is the one enqueued, as RocketMQ's timer decodes the message of (offset, size) it reads back:

- a whole record of that size, on the timer topic;
- the Java hash of its ``REAL_TOPIC`` is the one the timerlog record holds;
- its ``TIMER_OUT_MS`` agrees with the slot: at or before it for a record in its own slot (a due
  one goes into the slot being read), at or after it for one parked by a roll;
- stored before it was enqueued: the enqueue reads the record once it is stored and rounds its own
  clock down to the precision, so ``store_ms < write_ms + precision_ms``. A record written at a
  reused offset after a restart was stored after every enqueue of the run before it.
"""

from __future__ import annotations

from collections.abc import Callable

from mqstore.engine.java.jhash import java_hash
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import Decoded, DecodeKind
from mqstore.engine.timer.log import TimerRecord
from mqstore.engine.timer.put_rule import PROP_REAL_TOPIC, PROP_TIMER_OUT_MS, TIMER_TOPIC


def claim_problem(timer: TimerRecord, decoded: Decoded, precision_ms: int) -> str:
    """What makes the decoded record not the message ``timer`` names ("" when it is)."""
    record = decoded.record
    if decoded.kind is not DecodeKind.RECORD or record is None:
        return f"no record ({decoded.reason or decoded.kind.value})"
    if record.size != timer.size or record.topic != TIMER_TOPIC:
        return f"a {record.topic} record of {record.size} bytes, not a {TIMER_TOPIC} one of {timer.size}"
    real_topic = record.properties.get(PROP_REAL_TOPIC)
    if (java_hash(real_topic) if real_topic else 0) != timer.topic_hash:
        return f"REAL_TOPIC {real_topic!r} is not the one enqueued"
    out_ms = record.properties.get(PROP_TIMER_OUT_MS, "")
    if not out_ms.lstrip("-").isdigit():
        return "no TIMER_OUT_MS"
    if (int(out_ms) < timer.slot_ms) if timer.rolled else (int(out_ms) > timer.slot_ms):
        return f"TIMER_OUT_MS {out_ms} does not fit slot {timer.slot_ms}"
    if record.store_ms >= timer.write_ms + precision_ms:
        return f"stored at {record.store_ms}, after it was enqueued at {timer.write_ms}"
    return ""


def claimed_in(commitlog: CommitLog, precision_ms: int) -> Callable[[TimerRecord], bool]:
    """The check of a timerlog record against ``commitlog`` as it is now. A record naming an offset
    below the commitlog's first passes: retention took its message, and no record is written there
    again (its delivery finds no message and skips it)."""

    def claimed(timer: TimerRecord) -> bool:
        if timer.phys_offset < commitlog.min_offset:
            return True
        decoded = commitlog.read_record(timer.phys_offset, check_crc=False, read_body=False)
        return not claim_problem(timer, decoded, precision_ms)

    return claimed
