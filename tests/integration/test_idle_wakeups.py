"""An idle broker sleeps: no process wakes on a fixed short interval when nothing happens. Each one's
main thread (the actor's loop, or the supervisor's) is counted by its voluntary context switches (a
poll that slept and woke) over a window of idleness: a count of wake-ups, where every actor used to
wake ten times a second on its poll timeout, the supervisor sixteen, then the supervisor once a
second for every actor's unchanged report, and the writer, scheduler and timer once a second on
their own. The supervisor still restarts a dead actor at once: its exit wakes the supervisor's poll."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tests.integration.broker import Broker, free_port_range

WINDOW_S = 6.0
# per process in the window, the supervisor too: the safety nets (5 s), the writer's cleanup (10 s), the
# metrics collection (5 s) and the status it asks; about 3 each. A wake-up a second fails it (6 and a
# safety net), as the supervisor taking every actor's report once a second did (about 60)
MAX_WAKEUPS = 6
WINDOWS = 4


def _switches(pids: dict[str, int]) -> dict[str, int]:
    return {name: psutil.Process(pid).num_ctx_switches().voluntary for name, pid in pids.items()}


@pytest.mark.slow
def test_an_idle_broker_wakes_only_for_deadlines_that_exist(tmp_path: Path) -> None:
    base = free_port_range(2)
    broker = Broker(tmp_path, remoting_port=base, metrics_port=base + 1)
    assert broker.config_path is not None  # the tests' quick disk check would wake the writer ten times a second
    broker.config_path.write_text(broker.config_path.read_text().replace("disk_check_interval_ms = 100", ""))
    with broker:
        status = broker.status()
        assert status is not None
        pids = {"supervisor": int(status["pid"])} | {n: int(i["pid"]) for n, i in status["actors"].items()}
        time.sleep(WINDOW_S)  # a measurement window: what the start set going runs out
        # on a loaded machine the start's reports and collections can run past the first window: the
        # broker is given WINDOWS of them to be quiet in one (a wake-up a second is never quiet)
        for _ in range(WINDOWS):
            before = _switches(pids)
            time.sleep(WINDOW_S)  # the window measured, not a wait for a condition
            woke = {name: count - before[name] for name, count in _switches(pids).items()}
            if all(w <= MAX_WAKEUPS for w in woke.values()):
                break
        assert {"writer", "flusher", "cqbuilder", "indexbuilder", "reader-0", "remoting", "metrics", "timer",
                "transactions", "scheduler", "supervisor"} <= set(woke)
        assert {n: w for n, w in woke.items() if w > MAX_WAKEUPS} == {}, woke
        old = broker.kill("cqbuilder")
        broker.wait_restarted("cqbuilder", old)
