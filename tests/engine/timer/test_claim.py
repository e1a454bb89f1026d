"""A timerlog record is checked against the commitlog record at its offset: the timer topic's, of its
size and real topic, due where its slot says, and stored before it was enqueued."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mqstore.engine import MessageStore
from mqstore.engine.java.jhash import java_hash
from mqstore.engine.log.message import Message
from mqstore.engine.timer.claim import claim_problem, claimed_in
from mqstore.engine.timer.log import MAGIC_DEFAULT, MAGIC_ROLL, TimerRecord

P = 100


def test_only_the_timer_message_enqueued_passes(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path) as store:
        out_ms = 1_700_000_500_000
        put = store.put(Message("rmq_sys_wheel_timer", b"t", properties={"TIMER_OUT_MS": str(out_ms),
                                                                          "REAL_TOPIC": "Orders", "REAL_QID": "0"}))
        plain = store.put(Message("Orders", b"y"))
        commitlog = store.commitlog
        record = commitlog.read_record(put.phys_offset).record
        assert record is not None
        write_ms = record.store_ms // P * P
        timer = TimerRecord(-1, MAGIC_DEFAULT, write_ms, out_ms - write_ms, put.phys_offset, record.size,
                            java_hash("Orders"))
        decoded = commitlog.read_record(put.phys_offset)
        assert claim_problem(timer, decoded, P) == ""
        assert claimed_in(commitlog, P)(timer)
        wrong = [replace(timer, size=timer.size + 1), replace(timer, topic_hash=java_hash("Other")),
                 replace(timer, delta_ms=timer.delta_ms - P),  # a slot before the message is due
                 replace(timer, magic=MAGIC_DEFAULT | MAGIC_ROLL, delta_ms=timer.delta_ms + P),  # parked past it
                 replace(timer, write_ms=write_ms - P, delta_ms=timer.delta_ms + P)]  # enqueued before it was stored
        assert all(claim_problem(t, decoded, P) for t in wrong)
        elsewhere = replace(timer, phys_offset=plain.phys_offset)
        assert "Orders" in claim_problem(elsewhere, commitlog.read_record(plain.phys_offset), P)
        past_end = replace(timer, phys_offset=commitlog.max_offset)
        assert not claimed_in(commitlog, P)(past_end)
