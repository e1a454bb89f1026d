"""A load run starts once every process is set up: one that comes late (slow imports on a loaded
machine) no longer meets its queues' first messages seconds old."""

from __future__ import annotations

import time
from typing import Any

import multiprocess

from mqstore.scripts.bench.start_line import StartLine


def _worker(line: StartLine, hold: Any, out: Any) -> None:
    hold.wait()
    start_at = line.wait()
    out.put((start_at, time.time()))


def test_the_run_starts_after_the_last_process_is_set_up() -> None:
    ctx = multiprocess.get_context("spawn")
    line = StartLine(ctx, 2)
    early, late, out = ctx.Event(), ctx.Event(), ctx.Queue()
    early.set()
    procs = [ctx.Process(target=_worker, args=(line, hold, out), daemon=True) for hold in (early, late)]
    for p in procs:
        p.start()
    try:
        released_at = time.time()
        late.set()  # the late one is set up only now: the start cannot come before
        start_at = line.open(timeout_s=120)
        got = [out.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(10)
    assert start_at > released_at
    assert all(seen == start_at and returned >= start_at for seen, returned in got)


def test_at_once_has_started() -> None:
    line = StartLine.at_once(multiprocess.get_context("spawn"))
    assert line.wait() <= time.time()
