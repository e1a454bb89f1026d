"""Smoke test of the transactional throughput benchmark: a tiny run and its JSON's shape. Speed is
never asserted here."""

from __future__ import annotations

import json

import pytest

from mqstore.scripts.bench import transactions as bench_transactions


def test_a_tiny_run_reports_both_paths_per_thread_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_transactions.main(["--count", "20", "--threads", "1", "2", "--body-bytes", "16"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "transactions"
    for path in ("plain", "transactional"):
        assert [run["threads"] for run in report[path]] == [1, 2]
        for run in report[path]:
            assert run["messages"] == 20 and run["msgs_per_s"] > 0 and run["cpu_us_per_msg"] >= 0
    assert "transactions" in report["transactional"][0]["actors_cpu_us_per_msg"]
