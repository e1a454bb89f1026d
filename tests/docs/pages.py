"""What a docs page shows that the code can check: its fenced blocks, the ``mqstore ...`` lines of its
shell blocks, and the TOML blocks, each to be parsed by the real ``mqstore`` parser or loaded with
``load_config``. The page tests import these, so every page is read the same way."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

from mqstore.actors.config import BrokerConfig, load_config
from mqstore.scripts.cli.mqstore import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHELL = frozenset({"bash", "sh", "console", "shell"})


def read(page: str) -> str:
    """The text of ``docs/{page}``."""
    return (DOCS / page).read_text()


def blocks(text: str, *languages: str) -> list[str]:
    """The bodies of the fenced blocks of those languages, in page order."""
    return [body for lang, body in FENCE.findall(text) if lang in languages]


def command_lines(text: str) -> list[str]:
    """Every line of the page's shell blocks that runs ``mqstore`` (a ``$ `` prompt dropped; a
    backslash-continued line joined with the lines it continues)."""
    lines: list[str] = []
    for body in blocks(text, *SHELL):
        for line in body.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("mqstore "):
                lines.append(line)
    return lines


def parse_command(line: str) -> argparse.Namespace:
    """``line`` parsed by the ``mqstore`` command's own parser: an unknown subcommand, flag or choice
    exits (SystemExit), which a test reports as a failure. Anything after ``&&``, ``|`` or ``;`` is
    another command and is not this one's."""
    argv = shlex.split(re.split(r"\s(?:&&|\|\|?|;)\s", line)[0], comments=True)
    args = build_parser().parse_args(argv[1:])
    assert args.command == argv[1]
    return args


def load_toml(body: str, directory: Path) -> BrokerConfig:
    """A TOML block loaded as ``mqstore start --config`` loads it, from a file in ``directory``."""
    path = directory / "broker.toml"
    path.write_text(body)
    return load_config(directory / "store", path)
