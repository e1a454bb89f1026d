"""A slave's lag in time: how long the first byte it lacks has been written on the master, read from
the samples of the master's end (merged within the resolution, dropped once every copy is past them)."""

from __future__ import annotations

from mqstore.actors.ha.replicas import ReplicaSet
from mqstore.actors.ha.write_times import WriteTimes


def test_the_lag_is_the_age_of_the_first_byte_the_slave_lacks() -> None:
    times = WriteTimes(resolution_ms=10)
    times.note(100, 1_000)
    times.note(300, 1_500)
    times.note(250, 1_600)  # an older end, late: no sample
    assert times.lag_ms(0, 2_000) == 1_000     # byte 0 was written by 1 000
    assert times.lag_ms(99, 2_000) == 1_000
    assert times.lag_ms(100, 2_000) == 500     # byte 100 only by 1 500
    assert times.lag_ms(300, 2_000) == 0       # the whole log held
    assert times.lag_ms(400, 2_000) == 0


def test_samples_within_the_resolution_merge_into_the_earlier_one_so_the_lag_reads_high_never_low() -> None:
    times = WriteTimes(resolution_ms=20)
    times.note(100, 1_000)
    times.note(200, 1_015)  # merged: bytes up to 200 read as written by 1 000
    times.note(300, 1_020)  # a sample of its own
    assert list(times.samples) == [(200, 1_000), (300, 1_020)]
    assert times.lag_ms(150, 1_100) == 100 and times.lag_ms(250, 1_100) == 80


def test_what_every_copy_holds_is_forgotten_and_the_oldest_sample_bounds_the_rest() -> None:
    times = WriteTimes(resolution_ms=1, max_samples=3)
    for i in range(1, 6):
        times.note(i * 100, i * 1_000)
    assert list(times.samples) == [(300, 3_000), (400, 4_000), (500, 5_000)]
    assert times.lag_ms(0, 6_000) == 3_000  # behind every sample kept: at least its age
    times.forget_below(300)
    assert list(times.samples) == [(400, 4_000), (500, 5_000)]


def test_the_replica_set_reports_each_slaves_lag_in_bytes_and_time() -> None:
    replicas = ReplicaSet(in_sync_replicas=2, max_gap_not_in_sync=100)
    replicas.write_times.note(1_000, 10_000)
    replicas.write_times.note(2_000, 11_000)
    fast, slow = replicas.join(1, "10.0.0.2:4000", 10_000), replicas.join(2, "10.0.0.3:4000", 10_000)
    assert fast is not None and slow is not None
    fast.acked, fast.acked_ms = 2_000, 11_500
    slow.acked, slow.acked_ms = 1_500, 11_000
    assert replicas.stats(2_000, 12_000) == [
        {"broker_id": 1, "address": "10.0.0.2:4000", "acked": 2_000, "lag_bytes": 0, "lag_ms": 0,
         "since_report_ms": 500},
        {"broker_id": 2, "address": "10.0.0.3:4000", "acked": 1_500, "lag_bytes": 500, "lag_ms": 1_000,
         "since_report_ms": 1_000}]
    assert list(replicas.write_times.samples) == [(2_000, 11_000)]  # both slaves are past 1 000
