"""The load generator's live display: RocketMQ's benchmark columns, one row per second, and a progress bar.

Rendered with rich on stderr (stdout stays one JSON document); rows are kept for the summary either
way, so a run without a terminal (``live=False``) reports the same per-second figures.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

SHOWN_ROWS = 12


class LiveTable:
    def __init__(self, spec: Any, *, live: bool) -> None:
        self.spec = spec
        self.rows: list[dict[str, Any]] = []
        self._started = time.monotonic()
        self._next_row = self._started + 1.0
        self._window = {"ok": 0, "failed": 0, "batches": 0, "rt_sum_ms": 0.0, "rt_max_ms": 0.0, "consumed": 0}
        self._console = Console(stderr=True)
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                                  TimeElapsedColumn(), console=self._console)
        total = spec.count if spec.count is not None else spec.duration_s
        self._task = self._progress.add_task("sent" if spec.count is not None else "seconds", total=total)
        self._live = Live(self._render(), console=self._console, refresh_per_second=4) if live else None

    def __enter__(self) -> LiveTable:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)

    def add_send(self, data: dict[str, Any]) -> None:
        w = self._window
        for k in ("ok", "failed", "batches", "rt_sum_ms"):
            w[k] += data[k]
        w["rt_max_ms"] = max(w["rt_max_ms"], data["rt_max_ms"])

    def add_consume(self, count: int) -> None:
        self._window["consumed"] += count

    def tick(self, sent_ok: int, consumed: int) -> None:
        now = time.monotonic()
        if now < self._next_row:
            return
        span = now - (self._next_row - 1.0)
        self._next_row = now + 1.0
        w = self._window
        self.rows.append({"second": round(now - self._started, 1), "send_tps": round(w["ok"] / span),
                          "max_rt_ms": round(w["rt_max_ms"], 3),
                          "avg_rt_ms": round(w["rt_sum_ms"] / w["batches"], 3) if w["batches"] else 0.0,
                          "send_failed": w["failed"], "consume_tps": round(w["consumed"] / span)})
        self._window = {"ok": 0, "failed": 0, "batches": 0, "rt_sum_ms": 0.0, "rt_max_ms": 0.0, "consumed": 0}
        done = sent_ok if self.spec.count is not None else min(now - self._started, self.spec.duration_s)
        self._progress.update(self._task, completed=done)
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Group:
        table = Table(title=f"mqstore load: {self.spec.producers} producer(s), {self.spec.consumers} consumer(s), "
                            f"{self.spec.body_bytes} B x {self.spec.batch}")
        for name in ("Second", "Send TPS", "Max RT (ms)", "Average RT (ms)", "Send Failed", "Consume TPS"):
            table.add_column(name, justify="right")
        for r in self.rows[-SHOWN_ROWS:]:
            table.add_row(f"{r['second']:.0f}", f"{r['send_tps']:,}", f"{r['max_rt_ms']:.2f}", f"{r['avg_rt_ms']:.2f}",
                          f"{r['send_failed']:,}", f"{r['consume_tps']:,}")
        return Group(table, self._progress)
