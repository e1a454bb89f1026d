"""The traffic plot's time axis: ticks never finer than the data's minute buckets, each labelled once."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from mqstore.pipeline.stats_job import MINUTE_MS, MinuteStats

pytest.importorskip("matplotlib")

T0 = 1_700_000_040_000  # a minute's start (UTC)


def _axis(rows: list[MinuteStats], tmp_path: Path) -> tuple[list[float], list[str]]:
    from mqstore.pipeline.report import draw_messages
    fig: Any = draw_messages(rows, "test")
    fig.canvas.draw()
    ax = fig.axes[0]
    return list(ax.get_xticks()), [label.get_text() for label in ax.get_xticklabels()]


@pytest.mark.parametrize("minutes", [1, 2, 3, 17, 200, 3000])
def test_time_ticks_are_never_finer_than_a_minute_and_each_is_labelled_once(minutes: int, tmp_path: Path) -> None:
    rows = [MinuteStats("Orders", T0 + i * MINUTE_MS, 10 + i, 100, 0, {}) for i in range(minutes)]
    ticks, labels = _axis(rows, tmp_path)
    assert 2 <= len(ticks) <= 12
    steps_min = [(b - a) * 24 * 60 for a, b in pairwise(ticks)]
    assert min(steps_min) >= 1 - 1e-3, steps_min  # matplotlib dates are days
    assert all(abs(s - round(s)) < 1e-3 for s in steps_min)  # whole minutes: on the buckets' grid
    assert len(set(labels)) == len(labels), labels  # no two ticks read the same
