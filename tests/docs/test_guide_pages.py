"""The getting-started and concepts pages and the design notes say only what exists: every TOML block
loads with ``load_config``, every ``mqstore ...`` line of their shell blocks parses with the ``mqstore``
parser, every Python block parses, every configuration key they name as ``[section] key`` is a key of
that section, and every name they import from ``mqstore`` is in its public API."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

import mqstore
from mqstore.actors.config import load_config
from mqstore.scripts.cli.mqstore import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted([*(DOCS / "getting-started").glob("*.md"), *(DOCS / "concepts").glob("*.md"), DOCS / "design.md"])
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
KEY = re.compile(r"`\[(\w+)\] (\w+)")


def _blocks(lang: str) -> list[tuple[str, str]]:
    return [(page.name, body) for page in PAGES for kind, body in BLOCK.findall(page.read_text()) if kind == lang]


def _commands() -> list[str]:
    return [line.strip() for _, body in _blocks("bash") for line in body.splitlines()
            if line.strip().startswith("mqstore ")]


def test_the_pages_are_there() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert names == {"design.md", *(f"getting-started/{n}.md" for n in ("install", "embedded", "broker", "clients")),
                     *(f"concepts/{n}.md" for n in ("architecture", "files", "recovery", "consumption", "scheduled",
                                                    "reclamation"))}
    assert len(_commands()) >= 15 and len(_blocks("toml")) >= 1 and len(_blocks("python")) >= 8


@pytest.mark.parametrize("body", [body for _, body in _blocks("toml")])
def test_each_config_block_loads(tmp_path: Path, body: str) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(body)
    load_config(tmp_path / "store", path)


@pytest.mark.parametrize("line", _commands())
def test_each_command_parses(line: str) -> None:
    argv = shlex.split(line.replace("[", "").replace("]", ""), comments=True)  # optional arguments given
    args = build_parser().parse_args(argv[1:])  # an unknown subcommand or flag exits (SystemExit: a failure)
    assert args.command == argv[1]


@pytest.mark.parametrize("page_body", _blocks("python"), ids=lambda pb: pb[0])
def test_each_python_block_parses_and_imports_only_public_names(page_body: tuple[str, str]) -> None:
    tree = ast.parse(page_body[1])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "mqstore":
            assert {alias.name for alias in node.names} <= set(mqstore.__all__)


def test_every_key_named_is_a_key_of_its_section(tmp_path: Path) -> None:
    config = load_config(tmp_path / "store")
    named = {(section, key) for page in PAGES for section, key in KEY.findall(page.read_text())}
    assert len(named) >= 15
    assert [(s, k) for s, k in sorted(named) if not hasattr(getattr(config, s, None), k)] == []
