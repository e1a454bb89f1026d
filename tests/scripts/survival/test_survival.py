"""The survival harnesses at a small size: each runs for real and its verdict must be clean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _verdict(*args: str, timeout_s: int = 280) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    verdict: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdict["ok"], json.dumps(verdict, indent=1)[-4000:]
    assert proc.returncode == 0
    return verdict


@pytest.mark.slow
def test_crash_cut_small() -> None:
    verdict = _verdict("mqstore.scripts.survival.crash_cut", "--ops", "25", "--torn-per-step", "1", "--seed", "5")
    assert verdict["boundary_cuts"] and verdict["torn_cuts"] and verdict["failures"] == 0


@pytest.mark.slow
def test_full_disk_small(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    subprocess.run(["umount", "-l", str(probe)], check=False)
    verdict = _verdict("mqstore.scripts.survival.full_disk", "--cycles", "2", "--size-mb", "12", "--producers", "1")
    assert verdict["cycles"] == 2 and verdict["lost"] == 0 and verdict["actor_restarts"] == 0


@pytest.mark.slow
def test_chaos_small() -> None:
    verdict = _verdict("mqstore.scripts.survival.chaos", "--kills", "6", "--interval-ms", "400", "--producers", "2",
                       "--max-seconds", "120")
    assert verdict["kills"] == 6 and verdict["lost"] == 0 and verdict["consumed_not_stored"] == 0
