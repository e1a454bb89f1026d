"""``mqstore.scripts.bench.replication`` at a tiny size: a single broker, an ASYNC_MASTER and a SYNC_MASTER
(each with a real slave) under the same short load; the JSON has every figure, each there and positive
(a lag may be 0: a SYNC_MASTER's slave holds a message before its SEND_OK). Speed is never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.scripts.bench import replica_lag
from mqstore.scripts.bench.replication import MODES, measure

ROOT = Path(__file__).resolve().parents[3]


def positive(value: object) -> bool:
    return isinstance(value, int | float) and value > 0


@pytest.mark.slow
def test_the_three_setups_have_every_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_lag, "BUSY_BYTES", 1)  # a tiny load still counts as the load
    report = measure(tmp_path, seconds=1.5, rounds=1, procs=1, batch=20, inflight=4)
    assert [r["mode"] for r in report["runs"]] == list(MODES)
    for run in report["runs"]:
        assert positive(run["send"]["msgs_per_s"]) and run["send"]["failed"] == 0
        sums = run["cpu_sums_us_per_msg"]
        assert positive(sums["master_writer"]) and positive(sums["master_total"])
        assert positive(run["cpu_us_per_msg"]["master"]["writer"])
        if run["mode"] == "single":
            assert "slave" not in run["cpu_us_per_msg"] and sums["master_ha"] is None and "lag" not in run
            continue
        assert positive(sums["master_ha"]) and positive(sums["slave_ha"]) and positive(sums["slave_total"])
        assert sums["both_total"] == pytest.approx(sums["master_total"] + sums["slave_total"], abs=0.01)
        assert positive(run["cpu_us_per_msg"]["slave"]["ha"]) and "writer" not in run["cpu_us_per_msg"]["slave"]
        assert positive(run["bytes_per_msg"]) and run["catch_up_s"] >= 0
        assert {"master", "slave"} == set(run["ha_threads"])
        lag = run["lag"]
        for unit in ("bytes", "ms"):
            assert lag[unit]["samples"] > 0, unit
            assert all(lag[unit][q] is not None and lag[unit][q] >= 0 for q in ("p50", "p99", "max")), unit
        assert lag["ms"]["not_replicated_by_the_end"] >= 0 and lag["probe_failures"] >= 0
    summary = report["summary"]
    assert set(summary) == set(MODES)
    assert all(positive(summary[m]["msgs_per_s"]["median"]) for m in MODES)
    assert positive(summary["sync_master"]["cpu_master_ha_us_per_msg"]["median"])
    assert all(positive(v) for v in report["ratios"].values())
    assert positive(report["limits"]["sender_us_per_msg"]) and positive(report["limits"]["mb_per_s"])
    assert [g["met"] in (True, False) for g in report["goals"]] == [True, True]
    assert positive(report["goals"][0]["achieved"]["async_master_us"])
    assert positive(report["goals"][1]["achieved"]["ratio"])


def test_the_command_takes_its_setups_and_refuses_an_unknown_one() -> None:
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.bench.replication", "--modes", "triple"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and "invalid choice: 'triple'" in proc.stderr
    help_text = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "bench", "replication", "--help"],
                               capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert help_text.returncode == 0 and "--rounds" in help_text.stdout
