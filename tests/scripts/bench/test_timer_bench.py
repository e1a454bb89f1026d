"""The timer benchmark runs end to end on a small load and reports what it promises."""

from __future__ import annotations

import json

import pytest

from mqstore.scripts.bench import timer


@pytest.mark.slow
def test_the_timer_benchmark_reports_lateness_and_drain_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert timer.main(["--count", "300", "--burst", "300", "--delay-ms", "3000", "--spread-ms", "500",
                       "--precision-ms", "100"]) == 0
    report = json.loads(capsys.readouterr().out)
    spread, burst = report["spread"], report["burst"]
    assert spread["timers"] == 300 and spread["early"] == 0
    assert 0 <= spread["lateness_ms"]["min"] <= spread["lateness_ms"]["p50"] <= spread["lateness_ms"]["max"]
    assert burst["timers"] == 300 and burst["delivered_per_s"] > 0
