"""docs/concepts/architecture.md's socket table is the code's: every socket an actor binds (its
``bind`` calls, each actor kind found through the registry) is a row naming that actor and that socket
type, and every row of an endpoint role is bound by some actor."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "concepts" / "architecture.md").read_text()
ROW = re.compile(r"^\| `([\w-]+)` \| ([^|]+) \| (\w+) \|", re.M)
BIND = re.compile(r"bind\(\s*[\w.]+,\s*zmq\.(\w+),\s*[\w.]*\.(\w+)(\()?")
KIND = re.compile(r"def _(\w+)\(runtime: Runtime, index: str\) -> Actor:\n\s+from (\S+) import (\w+)")


def _module_file(module: str) -> Path:
    return ROOT / (module.removeprefix("mqstore.").replace(".", "/") + ".py")


def _notice_role(source: str, class_name: str) -> str:
    found = re.search(rf"class {class_name}\(.*?notice_role = \"(\w+)\"", source, re.S)
    assert found is not None, class_name
    return found.group(1)


def _binds() -> set[tuple[str, str, str]]:
    """(actor kind, socket role, ZeroMQ type) for every bind in the actors' code."""
    kinds = [(kind, _module_file(module), cls) for kind, module, cls in
             KIND.findall((ROOT / "actors" / "registry.py").read_text())]
    assert len(kinds) == 12
    binds = set()
    for kind, path, cls in [*kinds, ("supervisor", ROOT / "actors" / "supervisor.py", "")]:
        source = path.read_text()
        for socket_type, attr, call in BIND.findall(source):
            if attr == "role":
                role = _notice_role(source, cls)
            elif attr == "reader" and call:
                role = "reader-i"
            else:
                role = attr.replace("_", "-")
            binds.add((kind, role, socket_type))
    return binds


def test_every_bind_in_the_code_is_in_the_table() -> None:
    rows = {role: (bound_by, socket_type) for role, bound_by, socket_type in ROW.findall(PAGE)}
    binds = _binds()
    assert len(binds) >= 14
    wrong = [(kind, role, socket_type) for kind, role, socket_type in sorted(binds)
             if role not in rows or kind not in rows[role][0] or rows[role][1] != socket_type]
    assert wrong == []


def test_every_role_in_the_table_is_bound_by_the_code() -> None:
    bound = {role for _, role, _ in _binds()}
    assert [role for role, _, _ in ROW.findall(PAGE) if role not in bound] == []
