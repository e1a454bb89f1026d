"""One command-line style: every argument of every subcommand has a help text (its default shown),
every command that touches a store takes ``--store`` defaulting to ./mqstore-data, and
``mqstore --version`` answers."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqstore.scripts.cli.arguments import DEFAULT_STORE
from mqstore.scripts.cli.mqstore import build_parser, main, mqstore_version

ROOT = Path(__file__).resolve().parents[3]
# commands that make their own scratch stores, or none: everything else touches the user's store
NO_STORE = {"keys", "bench limits", "bench redis", "bench sweep", "bench suite", "bench roll", "bench trace",
            "bench replication"}  # each makes its own stores (--dir)


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[str, argparse.ArgumentParser]]:
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield " ".join(path), parser
    for action in subcommands:
        for name, sub in action.choices.items():
            yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(build_parser()))


def test_the_walk_finds_every_command() -> None:
    assert {"inspect", "query", "verify", "start", "status", "stop", "produce", "consume", "topics list",
            "topics delete", "groups describe", "groups reset", "spark export", "bench load"} <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_argument_has_help_and_every_store_command_takes_store(command: str) -> None:
    parser = COMMANDS[command]
    for action in parser._actions:
        assert action.help, f"mqstore {command}: {action.dest} has no help text"
    stores = [a for a in parser._actions if "--store" in a.option_strings]
    if command in NO_STORE:
        assert not stores
    else:
        assert len(stores) == 1 and stores[0].default == DEFAULT_STORE == Path("mqstore-data"), command
    text = parser.format_help()
    for action in parser._actions:
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            assert str(action.default) in " ".join(text.split()), f"mqstore {command}: {action.dest}'s default"


def test_a_leading_store_is_the_same_as_the_store_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "nowhere")]) == 2
    assert main(["inspect", "--store", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count(f"no store directory at {tmp_path / 'nowhere'}") == 2


def test_version() -> None:
    done = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "--version"], capture_output=True,
                          text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"mqstore {mqstore_version()}"
    assert mqstore_version()[0].isdigit()
