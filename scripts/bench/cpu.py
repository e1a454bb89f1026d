"""CPU seconds of the processes a benchmark measures (psutil: user + system, every thread), and the
broker's per message: what issue 14's targets are judged on, as CPU time, not wall time."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) the process ``pid`` has used so far."""
    import psutil
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def actor_cpu_s(store: Path | str) -> dict[str, float]:
    """CPU seconds each process of the broker on ``store`` has used so far: every actor, and the
    supervisor."""
    import psutil

    from mqstore.ipc.transport.control import control_request
    status = control_request(Path(store), "status")
    pids = {"supervisor": status.get("pid"), **{name: info.get("pid") for name, info in status["actors"].items()}}
    out = {}
    for name, pid in pids.items():
        if pid:
            with contextlib.suppress(psutil.Error):
                out[name] = process_cpu_s(pid)
    return out


def cpu_since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Each process's CPU seconds between two ``actor_cpu_s`` (a process started since counts from 0)."""
    return {name: after[name] - before.get(name, 0.0) for name in after}


def broker_cpu(cpu_s: dict[str, float], messages: int) -> dict[str, Any]:
    """``cpu_since`` as CPU µs per message: the broker's (every process summed) and each process's."""
    each = {name: seconds / max(messages, 1) * 1e6 for name, seconds in cpu_s.items()}
    return {"cpu_us_per_msg": round(sum(each.values()), 2),
            "actors_cpu_us_per_msg": {name: round(us, 2) for name, us in sorted(each.items())}}
