"""scripts/survival/fuzz/ at CI size: a few thousand inputs over every target, and its verdict clean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_fuzz_small() -> None:
    # a subprocess: the harness's hang alarm (SIGALRM) must not meet pytest-timeout's
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.survival.fuzz", "--inputs", "4000", "--seconds",
                           "60"],
                          cwd=ROOT, capture_output=True, text=True, timeout=280)
    verdict = json.loads(proc.stdout)
    assert verdict["ok"], json.dumps(verdict, indent=1)[-4000:]
    assert proc.returncode == 0
    assert set(verdict["targets"]) == {"record", "wire", "remoting", "queue_index", "config", "recovery"}
    assert all(t["inputs"] > 0 for t in verdict["targets"].values())
    assert verdict["inputs"] >= 2000
