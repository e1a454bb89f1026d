"""ruff and mypy --strict over the project, as part of the suite (style.md habit 7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mqstore", "engine", "ipc", "actors", "pipeline", "scripts", "tests")


def test_ruff_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", *PACKAGES], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
