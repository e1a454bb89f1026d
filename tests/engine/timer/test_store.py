"""The timer store's files and rules on real files: wheel slots, timerlog records and rolls, the
checkpoint, enqueue, a due slot's records, and recovery after a kill at any point."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.config import StoreConfig
from mqstore.engine.timer.checkpoint import TimerCheckpoint
from mqstore.engine.timer.log import BLANK_SIZE, RECORD_SIZE, TimerLog, TimerRecord, decode_record, last_unit_pos
from mqstore.engine.timer.store import TimerStore
from mqstore.engine.timer.wheel import WHEEL_FILE_SIZE, TimerWheel, TimerWheelError

P = 100
CONFIG = StoreConfig(timer_precision_ms=P, timer_roll_window_slot=100, timer_log_file_size=4096)
NOW = 1_700_000_000_000
ALL_CLAIMED: Callable[[TimerRecord], bool] = lambda record: True  # noqa: E731  every message still there


def _store(tmp_path: Path) -> TimerStore:
    store = TimerStore.open(tmp_path, CONFIG)
    store.checkpoint.last_read_ms = NOW
    return store


def test_enqueue_chains_a_slots_records_and_reads_them_first_in_first_out(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for phys in (10, 20, 30):
        store.enqueue(phys, 5, NOW + 500, "Orders", NOW)
    store.enqueue(40, 5, NOW + 600, "Orders", NOW)
    assert [r.phys_offset for _, r in store.slot_records(NOW + 500)] == [10, 20, 30]
    assert [r.phys_offset for _, r in store.slot_records(NOW + 600)] == [40]
    assert store.slot_records(NOW + 700) == []
    assert store.wheel.next_busy(NOW, NOW + 10_000) == NOW + 500
    assert store.wheel.next_busy(NOW + 600 + P, NOW + 10_000) == NOW + 10_000
    store.close()


def test_a_due_message_goes_into_the_slot_being_read(tmp_path: Path) -> None:
    store = _store(tmp_path)
    placed = store.enqueue(10, 5, NOW - 5_000, None, NOW)
    assert placed.slot_ms == NOW and not placed.rolled
    store.close()


def test_a_timer_past_the_roll_window_is_parked_and_marked_roll(tmp_path: Path) -> None:
    store = _store(tmp_path)
    window = 100 * P
    near = store.enqueue(10, 5, NOW + window + window // 4, None, NOW)
    far = store.enqueue(20, 5, NOW + 3 * window, None, NOW)
    assert (near.rolled, near.slot_ms) == (True, NOW + window // 2)
    assert (far.rolled, far.slot_ms) == (True, NOW + window)
    assert store.enqueue(30, 5, NOW + window - P, None, NOW).rolled is False
    (_, record), = store.slot_records(NOW + window)
    assert record.magic == 3 and record.phys_offset == 20
    store.close()


def test_the_wheel_has_rocketmqs_size_and_refuses_another(tmp_path: Path) -> None:
    TimerWheel.open(tmp_path, P).close()
    assert (tmp_path / "timerwheel").stat().st_size == WHEEL_FILE_SIZE == 38_707_200
    with open(tmp_path / "timerwheel", "r+b") as f:
        f.truncate(1000)
    with pytest.raises(TimerWheelError):
        TimerWheel.open(tmp_path, P)


def test_the_log_ends_each_file_with_rocketmqs_blank(tmp_path: Path) -> None:
    log = TimerLog.open(tmp_path, 4096)
    per_file = (4096 - BLANK_SIZE) // RECORD_SIZE
    positions = [log.append(TimerRecord(-1, 1, NOW, P, i, 5, 0)) for i in range(per_file + 1)]
    assert positions[-1] == 4096
    first = (tmp_path / "timerlog" / ("0" * 20)).read_bytes()
    blank_at = per_file * RECORD_SIZE
    assert struct.unpack_from(">iqi", first, blank_at) == (4096 - blank_at, 0, -875286124)
    log.close()


@given(st.builds(TimerRecord, st.integers(-1, 1 << 40), st.integers(0, 15), st.integers(0, 1 << 45),
                 st.integers(-(1 << 31), (1 << 31) - 1), st.integers(0, 1 << 50), st.integers(1, 1 << 20),
                 st.integers(-(1 << 31), (1 << 31) - 1)))
def test_a_record_round_trips_and_every_cut_prefix_reads_as_none(record: TimerRecord) -> None:
    data = record.encode()
    assert len(data) == RECORD_SIZE and decode_record(data) == record
    assert all(decode_record(data[:n]) is None for n in range(RECORD_SIZE))


def test_recovery_repoints_a_slot_the_kill_left_behind_and_cuts_a_torn_record(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.enqueue(10, 5, NOW + 500, "T", NOW)
    # a kill after the append, before the slot: the log has the record, the slot does not point at it
    slot = store.wheel.get(NOW + 500)
    pos = store.log.append(TimerRecord(slot.last_pos, 1, NOW, 500, 20, 5, 0))
    # and a record cut before its size field was written
    mf = store.log.queue.last_file
    assert mf is not None
    mf.buffer[pos + RECORD_SIZE + 4:pos + 2 * RECORD_SIZE] = TimerRecord(-1, 1, NOW, 900, 30, 5, 0).encode()[4:]
    store.close()
    reopened = TimerStore.open(tmp_path, CONFIG)
    assert reopened.recover(ALL_CLAIMED) == 20  # the last record's commitlog offset: enqueued up to there
    assert [r.phys_offset for _, r in reopened.slot_records(NOW + 500)] == [10, 20]
    assert reopened.slot_records(NOW + 900) == []
    assert reopened.log.end_pos == 2 * RECORD_SIZE
    assert reopened.log.append(TimerRecord(-1, 1, NOW, 900, 40, 5, 0)) == 2 * RECORD_SIZE
    reopened.close()


def test_the_checkpoint_keeps_its_fields_at_rocketmqs_offsets(tmp_path: Path) -> None:
    checkpoint = TimerCheckpoint.open(tmp_path)
    assert checkpoint.created and checkpoint.in_flight_phys == -1
    checkpoint.last_read_ms, checkpoint.log_flushed_pos, checkpoint.next_queue_offset = NOW, 520, 7
    checkpoint.flush(NOW + 1)
    checkpoint.close()
    data = (tmp_path / "config" / "timercheck").read_bytes()
    assert len(data) == 4096
    assert struct.unpack_from(">qqqqqqq", data, 0) == (NOW, 520, 7, 7, 0, NOW + 1, 1)
    again = TimerCheckpoint.open(tmp_path)
    assert not again.created and again.next_queue_offset == 7
    again.close()


def test_a_log_opened_with_another_file_size_keeps_its_own(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.enqueue(10, 5, NOW + 500, None, NOW)
    store.close()
    reopened = TimerStore.open(tmp_path, replace(CONFIG, timer_log_file_size=8192))
    assert reopened.log.queue.file_size == 4096
    reopened.close()


def test_verify_finds_a_timer_record_that_points_at_no_timer_message(tmp_path: Path) -> None:
    from mqstore.engine import MessageStore
    from mqstore.engine.log.message import Message
    from mqstore.engine.repair.verify import verify_store

    with MessageStore.open(tmp_path) as opened:
        put = opened.put(Message("rmq_sys_wheel_timer", b"x", properties={"TIMER_OUT_MS": str(NOW)}))
        plain = opened.put(Message("Orders", b"y"))
    store = _store(tmp_path)
    store.enqueue(put.phys_offset, (plain.phys_offset - put.phys_offset), NOW + 500, "Orders", NOW)
    assert verify_store(tmp_path).ok
    store.enqueue(plain.phys_offset, 5, NOW + 500, "Orders", NOW)
    store.close()
    report = verify_store(tmp_path)
    assert [f.kind for f in report.findings] == ["timer_record_mismatch"]


def _fill(log: TimerLog, phys: list[int]) -> list[int]:
    return [log.append(TimerRecord(-1, 1, NOW, P, p, 5, 0)) for p in phys]


def test_last_unit_pos_is_rocketmqs_offset_for_the_last_unit() -> None:
    per_file = (4096 - BLANK_SIZE) // RECORD_SIZE
    assert last_unit_pos(4096) == (per_file - 1) * RECORD_SIZE == 4096 - 4080 % 52 - 16 - 52
    assert last_unit_pos(100 * 1024 * 1024) % RECORD_SIZE == 0


def test_timerlog_files_go_once_every_record_names_a_deleted_commitlog_offset(tmp_path: Path) -> None:
    log = TimerLog.open(tmp_path, 4096)
    per_file = (4096 - BLANK_SIZE) // RECORD_SIZE
    _fill(log, [1000 + i for i in range(3 * per_file + 5)])  # three full files and a fourth
    names = sorted(p.name for p in (tmp_path / "timerlog").iterdir())
    assert len(names) == 4
    assert log.delete_expired(1000 + per_file - 1) == 0   # the first file's last record is still live
    assert log.delete_expired(1000 + per_file) == 1
    assert log.delete_expired(10**9) == 2                 # never the last file
    assert sorted(p.name for p in (tmp_path / "timerlog").iterdir()) == names[3:]
    assert log.read(0) is None and log.read(3 * 4096) is not None
    log.close()


def test_a_rolled_record_naming_an_old_message_does_not_take_live_timers_with_it(tmp_path: Path) -> None:
    log = TimerLog.open(tmp_path, 4096)
    per_file = (4096 - BLANK_SIZE) // RECORD_SIZE
    _fill(log, [5000 + i for i in range(per_file - 1)] + [10])  # the last: a roll of an old message
    _fill(log, [9000])
    assert log.delete_expired(100) == 0  # RocketMQ's last-record test would delete 77 live timers
    assert log.delete_expired(5000 + per_file) == 1
    log.close()


def test_a_file_with_a_record_that_does_not_read_is_kept(tmp_path: Path) -> None:
    log = TimerLog.open(tmp_path, 4096)
    per_file = (4096 - BLANK_SIZE) // RECORD_SIZE
    _fill(log, list(range(2 * per_file)))
    log.queue.files[0].buffer[RECORD_SIZE:RECORD_SIZE + 4] = b"\0\0\0\0"
    assert log.delete_expired(10**9) == 0
    log.close()


def test_a_slot_whose_chain_runs_into_a_deleted_file_reads_what_is_left_and_recovery_starts_after(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    per_file = (CONFIG.timer_log_file_size - BLANK_SIZE) // RECORD_SIZE
    for i in range(per_file + 3):
        store.enqueue(100 + i, 5, NOW + 500, "Orders", NOW)
    store.flush(NOW)
    assert store.delete_expired(10**9) == 1
    assert [r.phys_offset for _, r in store.slot_records(NOW + 500)] == [100 + per_file + i for i in range(3)]
    store.close()
    reopened = TimerStore.open(tmp_path, CONFIG)
    assert reopened.recover(ALL_CLAIMED) == 100 + per_file + 2
    assert reopened.log.end_pos == 4096 + 3 * RECORD_SIZE
    reopened.close()


def test_recovery_cuts_the_log_at_the_first_record_naming_a_lost_message_and_repoints_its_slot(tmp_path: Path) -> None:
    """The kernel wrote the timerlog and the wheel back, the power cut lost the commitlog past 25:
    records naming messages past it are cut, and slots pointing at them point at what is left."""
    store = _store(tmp_path)
    for phys, out_ms in ((10, NOW + 500), (20, NOW + 500), (30, NOW + 500), (40, NOW + 900)):
        store.enqueue(phys, 5, out_ms, "T", NOW)
    store.close()
    reopened = TimerStore.open(tmp_path, CONFIG)
    assert reopened.recover(lambda record: record.phys_offset < 25) == 20
    assert reopened.log.end_pos == 2 * RECORD_SIZE
    assert [r.phys_offset for _, r in reopened.slot_records(NOW + 500)] == [10, 20]
    assert reopened.wheel.get(NOW + 900).empty and reopened.wheel.next_busy(NOW + 600, NOW + 10_000) == NOW + 10_000
    reopened.enqueue(50, 5, NOW + 500, "T", NOW)  # the offsets after recovery, enqueued again
    assert [r.phys_offset for _, r in reopened.slot_records(NOW + 500)] == [10, 20, 50]
    reopened.close()


def test_a_slot_whose_records_before_the_scan_survive_is_repointed_at_its_last_one(tmp_path: Path) -> None:
    store = _store(tmp_path)
    per_file = (CONFIG.timer_log_file_size - BLANK_SIZE) // RECORD_SIZE
    store.enqueue(1, 5, NOW + 500, "T", NOW)
    for i in range(per_file + 5):  # into the second file, another slot
        store.enqueue(2 + i, 5, NOW + 700, "T", NOW)
    store.enqueue(10_000, 5, NOW + 500, "T", NOW)  # its message lost
    store.checkpoint.log_flushed_pos = 2 * CONFIG.timer_log_file_size  # the scan starts at the second file
    store.close()
    reopened = TimerStore.open(tmp_path, CONFIG)
    assert reopened.recover(lambda record: record.phys_offset < 10_000) == 2 + per_file + 4
    assert [r.phys_offset for _, r in reopened.slot_records(NOW + 500)] == [1]
    assert len(reopened.slot_records(NOW + 700)) == per_file + 5
    reopened.close()


def test_the_enqueue_mark_reaches_the_checkpoint_only_with_the_flush_after_its_records(tmp_path: Path) -> None:
    from mqstore.engine.timer.store import EnqueueMark

    store = _store(tmp_path)
    store.enqueue(10, 5, NOW + 500, "T", NOW)
    store.flush(NOW)  # no mark the commitlog's flush covers: the enqueue's fields stay
    assert (store.checkpoint.next_queue_offset, store.checkpoint.log_flushed_pos) == (0, 0)
    store.flush(NOW, EnqueueMark(1, RECORD_SIZE))
    assert (store.checkpoint.next_queue_offset, store.checkpoint.log_flushed_pos) == (1, RECORD_SIZE)
    store.close()
