"""On a SLAVE the metasync actor is the only writer of ``config/topics.json`` and
``config/delayOffset.json`` (on a master: the writer and the scheduler, which a slave does not run).
Read off the code: every module an actor of a slave's set loads (from the registry's lazy import of its
kind, following ``mqstore.actors`` imports), and the supervisor's own start, call none of what writes
those files, except metasync's."""

from __future__ import annotations

import ast
from pathlib import Path

from mqstore.actors.actor_set import actor_names
from mqstore.actors.config import load_config

ROOT = Path(__file__).resolve().parents[3]
# what writes the two files: the engine's writers, and the topic table's changes (which persist it)
FILE_WRITERS = {"write_topic_file", "write_delay_offsets"}
TOPIC_TABLE_CHANGES = {"persist", "flush", "create", "get_or_create", "delete"}


def module_path(name: str) -> Path | None:
    parts = name.removeprefix("mqstore.").split(".")
    for path in (ROOT.joinpath(*parts).with_suffix(".py"), ROOT.joinpath(*parts, "__init__.py")):
        if path.exists():
            return path
    return None


def actor_imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mqstore.actors"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("mqstore.actors"))
    return {name for name in names if module_path(name) is not None and name != "mqstore.actors.registry"}


def kind_modules() -> dict[str, str]:
    """Each kind's actor module, from the registry's lazy imports (``_writer`` imports the writer's)."""
    tree = ast.parse((ROOT / "actors" / "registry.py").read_text())
    kinds = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_"):
            [module] = [n.module for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and n.module]
            kinds[node.name.removeprefix("_")] = module
    return kinds


def closure(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_path(name)
        assert path is not None, name
        todo.extend(actor_imports(ast.parse(path.read_text())))
    return seen


def writes(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    uses_topic_table = "TopicTable" in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in FILE_WRITERS or (uses_topic_table and name in TOPIC_TABLE_CHANGES):
                found.add(name)
    return found


def test_only_metasync_writes_topics_and_delay_offsets_on_a_slave(tmp_path: Path) -> None:
    slave = load_config(tmp_path, broker={"role": "SLAVE", "broker_id": 1},
                        ha={"master_address": "127.0.0.1:10912"}, remoting={"enabled": True})
    kinds = kind_modules()
    names = actor_names(slave, set(kinds))
    assert "metasync" in names and not {"writer", "scheduler", "timer", "transactions"} & set(names)
    modules = {"mqstore.actors.supervisor"}
    for name in names:
        modules |= closure(kinds[name.partition("-")[0]])
    writers = {module: found for module in sorted(modules) if (found := writes(module_path(module)))}  # type: ignore[arg-type]
    assert writers == {"mqstore.actors.metasync.apply": {"write_topic_file", "write_delay_offsets"}}


def test_the_scan_sees_a_masters_writers(tmp_path: Path) -> None:
    """The same scan over a master's set finds the writer's and the scheduler's: it can fail."""
    kinds = kind_modules()
    modules = closure(kinds["writer"]) | closure(kinds["scheduler"])
    found = set().union(*(writes(module_path(m)) for m in modules))  # type: ignore[arg-type]
    assert "write_delay_offsets" in found and found & TOPIC_TABLE_CHANGES
