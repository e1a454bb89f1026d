"""The Spark read bench on a tiny store: every reader timed, the full and the pruned ratios reported."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_spark_read_reports_full_and_pruned_reads(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.bench.spark_read", "--messages", "2000",
                           "--rounds", "1",
                           "--no-tuples", "--dir", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                          timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout[proc.stdout.index("{"):])
    readers = ("arrow", "parquet", "arrow_pruned", "parquet_pruned")
    assert set(doc["runs"]) == {f"{reader}_{action}" for reader in readers for action in ("noop", "agg")}
    assert all(run["rows_per_s"] > 0 for run in doc["runs"].values())
    for ratio in ("arrow_over_parquet", "pruned_over_parquet"):
        assert doc[f"{ratio}_noop"] > 0 and doc[f"{ratio}_agg"] > 0
    assert list(tmp_path.iterdir()) == []  # the store and its Parquet copy are removed
