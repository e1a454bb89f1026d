"""docs/reference/exit-codes.md lists every exit status the ``mqstore`` command and the broker define,
with the value the code gives it, and no other."""

from __future__ import annotations

import re
from pathlib import Path

import mqstore.actors.supervisor as supervisor
import mqstore.scripts.cli.mqstore as command

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "exit-codes.md"


def _defined() -> dict[str, int]:
    found = {name: int(getattr(command, name)) for name in dir(command) if name.startswith("EXIT_")}
    for name in dir(supervisor):
        if name.startswith("EXIT_"):
            assert found.get(name, int(getattr(supervisor, name))) == int(getattr(supervisor, name)), name
            found[name] = int(getattr(supervisor, name))
    return found


def test_the_page_lists_each_exit_code_with_its_value() -> None:
    listed = {name: int(code) for code, name in re.findall(r"^\| (\d+) \| `(EXIT_\w+)` \|", PAGE.read_text(), re.M)}
    assert listed == _defined()
