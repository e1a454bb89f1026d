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


def test_a_load_point_is_each_process_share_of_a_core_and_its_wakeups() -> None:
    from mqstore.scripts.bench.where import usage_since
    before = {"writer": (1.0, 100), "supervisor": (2.0, 50)}
    after = {"writer": (1.5, 300), "supervisor": (2.1, 60), "reader-0": (0.2, 10)}
    idle = usage_since(before, after, 10.0)
    assert idle["actors"]["writer"] == {"core_percent": 5.0, "wakeups_per_s": 20.0}
    assert idle["actors"]["reader-0"] == {"core_percent": 2.0, "wakeups_per_s": 1.0}  # started since: from zero
    assert idle["core_percent"] == 8.0 and idle["wakeups_per_s"] == 22.0
    loaded = usage_since(before, after, 10.0, messages=100_000)
    assert loaded["actors"]["writer"]["cpu_us_per_msg"] == 5.0 and loaded["actors"]["writer"]["msgs_per_wakeup"] == 500
    assert loaded["broker_cpu_us_per_msg"] == 8.0


def test_the_suite_rows_judge_each_point_against_its_goal() -> None:
    from mqstore.scripts.bench.where import suite_rows
    point = {"core_percent": 0.4, "wakeups_per_s": 5.0, "actors": {"writer": {"core_percent": 0.4}}}
    rate = {"rate": 5000, "broker_cpu_us_per_msg": 9.0, "send_msgs_per_s": 5000, "wakeups_per_s": 100.0,
            "latency_ms": {"samples": 10, "p50": 1.0, "p99": 2.0, "max": 50.0}}
    report = {"idle": point, "idle_500_topics": {**point, "core_percent": 1.5}, "rate_5000": rate,
              "tenth_of_max": {**rate, "broker_cpu_us_per_msg": 3.0}, "half_of_max": rate}
    met = {row[0].split(" (")[0]: row[3] for row in suite_rows(report, [20.0, 99.0])}
    assert met == {"broker idle, idle": True, "broker idle, idle 500 topics": False,
                   "broker CPU a message at rate 5000": False, "broker CPU a message at tenth of max": True,
                   "send -> consumed, the slowest message of every latency run": True}
    assert not suite_rows(report, [20.0, 101.0])[-1][3] and not suite_rows(report, [None])[-1][3]
    assert suite_rows({"error": "boom"}, [])[0][2:] == ("boom", False)
