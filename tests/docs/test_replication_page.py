"""docs/operations/replication.md says only what exists: every TOML block loads with ``load_config``, every
``mqstore ...`` line of its command blocks parses with the ``mqstore`` parser, the hostile harness's
line with the harness's, and every setting of its table is a key of that section with that default."""

from __future__ import annotations

import re
import shlex
from dataclasses import fields
from pathlib import Path

import pytest

from mqstore.actors.config import load_config
from mqstore.actors.config_ha import HaConfig
from mqstore.scripts.survival.hostile.command import parse_args as hostile_args
from tests.docs.pages import blocks, command_lines, load_toml, parse_command, read

TEXT = read("operations/replication.md")
TOMLS = blocks(TEXT, "toml")
COMMANDS = command_lines(TEXT)
SETTING = re.compile(r"^\| `\[(\w+)\] (\w+)`(?:, `(\w+)`)? \| (`[^`]*`|[^|]*?) \|", re.M)


def test_the_page_has_what_the_checks_read() -> None:
    assert len(TOMLS) == 2 and len(COMMANDS) >= 6 and len(SETTING.findall(TEXT)) == 24


@pytest.mark.parametrize("body", TOMLS, ids=["master", "slave"])
def test_each_config_block_loads(tmp_path: Path, body: str) -> None:
    config = load_toml(body, tmp_path)
    assert config.ha.secret and len(config.ha.secret) >= 16


@pytest.mark.parametrize("line", COMMANDS)
def test_each_command_parses(line: str) -> None:
    parse_command(line)


def test_the_hostile_harness_line_parses() -> None:
    line = re.search(r"`python -m mqstore\.scripts\.survival\.hostile ([^`]*)`", TEXT)
    assert line is not None
    assert hostile_args(shlex.split(line.group(1))).attacks == ["ha_port_plain", "ha_port_secret"]


def test_every_ha_key_is_in_the_table() -> None:
    shown = {name for section, key, other, _ in SETTING.findall(TEXT) if section == "ha" for name in (key, other)}
    assert {f.name for f in fields(HaConfig)} <= shown


def test_every_setting_exists_with_the_default_the_table_gives(tmp_path: Path) -> None:
    config = load_config(tmp_path / "store")
    for section, key, other, default in SETTING.findall(TEXT):
        for name in filter(None, (key, other)):
            value = getattr(getattr(config, section), name)  # AttributeError: no such key
            if default.startswith("`"):
                shown = default.strip("`")
                expected = ('""' if value == "" else str(value).lower() if isinstance(value, bool) else str(value))
                assert shown == expected, f"[{section}] {name}: the page says {shown}, the default is {expected}"
