"""``mqstore config`` through the command: every setting with its value and where it came from (the
file, mqstore start's own defaults, the store's saved geometry, the defaults), and a bad file said
plainly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from mqstore.actors.config import BrokerSection, FlushConfig
from mqstore.engine import MessageStore, StoreConfig
from mqstore.engine.config import Geometry

ROOT = Path(__file__).resolve().parents[3]


def _config(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "config", *argv],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def _settings(*argv: str) -> dict[str, dict[str, Any]]:
    done = _config(*argv, "--json")
    assert done.returncode == 0, done.stderr
    return {row["key"]: row for row in map(json.loads, done.stdout.splitlines())}


def test_each_setting_says_where_its_value_came_from(tmp_path: Path) -> None:
    store = tmp_path / "store"
    tiny = Geometry(commitlog_file_size=64 * 1024, cq_entries_per_file=64, index_slot_count=16, index_entry_count=64)
    with MessageStore.open(store, StoreConfig(geometry=tiny)):
        pass  # a store that saved its geometry
    toml = tmp_path / "broker.toml"
    toml.write_text('[broker]\nreaders = 3\n\n[metrics]\nenabled = false\n')
    settings = _settings("--store", str(store), "--config", str(toml))
    assert settings["broker.readers"] == {"type": "setting", "key": "broker.readers", "value": 3, "source": "file"}
    assert (settings["metrics.enabled"]["value"], settings["metrics.enabled"]["source"]) == (False, "file")
    assert (settings["remoting.enabled"]["value"], settings["remoting.enabled"]["source"]) == (True, "start")
    assert settings["store.geometry.commitlog_file_size"]["value"] == 64 * 1024
    assert settings["store.geometry.commitlog_file_size"]["source"] == "store"
    assert settings["flush.mode"] == {"type": "setting", "key": "flush.mode", "value": FlushConfig().mode,
                                      "source": "default"}
    assert settings["broker.default_queues"]["value"] == BrokerSection().default_queues
    assert settings["store_dir"]["source"] == "option"
    shown = _config("--store", str(store), "--config", str(toml))
    assert shown.returncode == 0 and "broker.readers" in shown.stdout and "file" in shown.stdout


def test_a_bad_config_file_is_said_plainly(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text("[broker]\nreaders = 0\n")
    done = _config("--store", str(tmp_path / "store"), "--config", str(toml))
    assert done.returncode == 2 and "broker.readers must be between 1 and 64" in done.stderr
    assert "Traceback" not in done.stderr
    toml.write_text("[broker\n")
    done = _config("--store", str(tmp_path / "store"), "--config", str(toml))
    assert done.returncode == 2 and "cannot read config" in done.stderr and "Traceback" not in done.stderr
