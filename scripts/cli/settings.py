"""``mqstore config``: the configuration a broker started on ``--store`` with ``--config`` would run
with, every setting with its value and where that came from (``rabbitmq-diagnostics environment``,
``kafka-configs --describe --all``):

    file      the TOML file given with ``--config``
    start     ``mqstore start``'s own default where the file is silent (the remoting front and the
              metrics are on)
    store     the store's saved geometry (``config/storeGeometry.json``), which a store keeps for
              life, when the file has no ``[store.geometry]``
    option    ``--store`` itself (``store_dir``)
    default   the configuration's default (``docs/reference/config.md``)

The file is read and validated as ``mqstore start`` reads it (a bad one: exit 2, with the reason);
nothing is started or written.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mqstore.actors.config import ConfigError, load_config
from mqstore.engine.read.store_files import read_geometry
from mqstore.scripts.cli.arguments import add_store
from mqstore.scripts.cli.offline import CommandError
from mqstore.scripts.cli.output import print_table

ON_FOR_START = ("remoting", "metrics")  # sections ``mqstore start`` turns on unless the file says otherwise


def add_config_command(commands: Any) -> None:
    cmd = commands.add_parser("config", help="the effective configuration: every setting, its value and where it "
                              "came from (the file, mqstore start, the store, the defaults)")
    add_store(cmd)
    cmd.add_argument("--config", type=Path, help="the TOML configuration file mqstore start is given")
    cmd.add_argument("--json", action="store_true", help="one JSON object per setting, one a line")
    cmd.set_defaults(handler=_config)


def _config(args: argparse.Namespace) -> int:
    given = _file(args.config)
    overrides = {section: {"enabled": True} for section in ON_FOR_START
                 if "enabled" not in given.get(section, {})}
    try:
        config = load_config(args.store, args.config, **overrides)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    values = asdict(config)
    values.pop("geometry_given")
    geometry_from_store = not config.geometry_given and Path(args.store).is_dir()
    if geometry_from_store:
        values["store"]["geometry"] = asdict(read_geometry(Path(args.store)))
    rows = []
    for key, value in _flat(values):
        if key == "store_dir":
            source = "option"
        elif _has(given, key):
            source = "file"
        elif key.split(".")[0] in overrides and key.endswith(".enabled"):
            source = "start"
        elif geometry_from_store and key.startswith("store.geometry."):
            source = "store"
        else:
            source = "default"
        rows.append({"type": "setting", "key": key, "value": value, "source": source})
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(f"the configuration of a broker on {args.store}"
              + (f" with {args.config}" if args.config else " without a config file"))
        print_table("settings", ("setting", "value", "from"), [(r["key"], json.dumps(r["value"]), r["source"])
                                                              for r in rows])
    return 0


def _file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read config {path}: {exc}") from None


def _flat(values: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value) and name != "topics":
            out += _flat(value, key + ".")
        else:
            out.append((key, list(value) if isinstance(value, tuple) else value))
    return out


def _has(table: dict[str, Any], key: str) -> bool:
    for part in key.split("."):
        if not isinstance(table, dict) or part not in table:
            return False
        table = table[part]
    return True
