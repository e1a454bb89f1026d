"""``mqstore.scripts.bench.where``: thread times read off /proc, and the per-message table made of two reads."""

import os
import threading

from mqstore.scripts.bench.where import thread_times, where


def test_this_process_has_a_main_thread_and_its_other_threads_apart() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        kinds = thread_times(os.getpid())
    finally:
        stop.set()
        thread.join()
    # ZeroMQ's I/O threads too when an earlier test of this process left a context behind
    assert {"main", "other"} <= set(kinds) <= {"main", "other", "zmq_io"}
    user, system, switches = kinds["main"]
    assert user >= 0 and system >= 0 and switches >= 0


def test_the_table_is_per_message_and_leaves_idle_threads_out() -> None:
    before = {"writer": {"main": (1.0, 0.5, 100), "zmq_io": (0.2, 0.1, 0), "other": (0.0, 0.0, 0)}}
    after = {"writer": {"main": (1.3, 0.6, 400), "zmq_io": (0.2, 0.2, 0), "other": (0.0, 0.0, 0)},
             "reader-0": {"main": (0.01, 0.0, 10)}}
    table = where(before, after, 100_000, 2.0)
    writer = table["actors"]["writer"]
    assert writer["main"] == {"user_us": 3.0, "system_us": 1.0}
    assert writer["zmq_io"] == {"user_us": 0.0, "system_us": 1.0}
    assert "other" not in writer
    assert writer["wakeups_per_s"] == 150 and writer["msgs_per_wakeup"] == 333.3
    assert writer["total_us"] == 5.0
    assert table["actors"]["reader-0"]["total_us"] == 0.1  # started during the run: counted from zero
    assert table["broker_us_per_msg"] == 5.1
