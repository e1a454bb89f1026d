"""docs/operations/mqstore.service: ``systemd-analyze verify`` finds nothing to say of it (where the tool
exists), and its settings fit the broker: the command it starts and stops, a SIGTERM to the supervisor
alone (which stops the actors in order), no restart on the exit statuses a restart would repeat, and a
private run directory for the ipc sockets."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mqstore.actors.supervisor import EXIT_GAVE_UP
from mqstore.scripts.cli.mqstore import EXIT_USAGE, build_parser

UNIT = Path(__file__).resolve().parents[2] / "docs" / "operations" / "mqstore.service"
INSTALLED = "/opt/mqstore/bin/mqstore"


def _settings() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verify_finds_nothing(tmp_path: Path) -> None:
    # verify wants ExecStart's binary to exist: this Python stands in for the installed command
    unit = tmp_path / "mqstore.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED, sys.executable))
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=120,
                            check=False, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def test_the_unit_starts_and_stops_the_broker_with_commands_that_parse() -> None:
    settings = _settings()
    for key, command in (("ExecStart", "start"), ("ExecStop", "stop")):
        (line,) = settings[key]
        argv = shlex.split(line.lstrip("-"))
        assert argv[0] == INSTALLED and argv[1] == command
        build_parser().parse_args(argv[1:])


def test_the_stop_is_the_supervisor_s_ordered_one() -> None:
    settings = _settings()
    assert settings["KillMode"] == ["mixed"] and settings["KillSignal"] == ["SIGTERM"]
    assert settings["Type"] == ["exec"]
    wait_ms = int(shlex.split(settings["ExecStop"][0])[-1])
    assert wait_ms < int(settings["TimeoutStopSec"][0]) * 1000


def test_no_restart_on_what_a_restart_repeats() -> None:
    settings = _settings()
    assert settings["Restart"] == ["on-failure"]
    assert {int(code) for code in settings["RestartPreventExitStatus"][0].split()} == {EXIT_USAGE, EXIT_GAVE_UP}


def test_the_run_directory_is_private() -> None:
    settings = _settings()
    assert settings["RuntimeDirectory"] == ["mqstore"] and settings["RuntimeDirectoryMode"] == ["0700"]
    assert "XDG_RUNTIME_DIR=/run/mqstore" in settings["Environment"]
    assert settings["User"] == ["mqstore"] and int(settings["LimitNOFILE"][0]) >= 4096
