"""bench_roll runs both ways on tiny files and reports every roll, adopted or not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqstore.scripts.bench import roll as bench_roll


def test_engine_mode_times_every_roll(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_roll.main(["--engine", "--dir", str(tmp_path), "--file-mib", "1", "--files", "3", "--rounds", "1",
                            "--body-bytes", "4096", "--batch", "16", "--pace-ms", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    spare, inline = out["summary"]["spare"], out["summary"]["inline"]
    assert spare["rolls"] == inline["rolls"] == 2
    assert spare["spares_adopted"] >= 1 and inline["spares_adopted"] == 0


@pytest.mark.slow
def test_broker_mode_times_every_roll(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_roll.main(["--dir", str(tmp_path), "--file-mib", "1", "--files", "3", "--rounds", "1",
                            "--body-bytes", "4096", "--batch", "16"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["spare"]["rolls"] == out["summary"]["inline"]["rolls"] == 2
    assert out["summary"]["inline"]["spares_adopted"] == 0 and out["summary"]["spare"]["spares_adopted"] >= 1
