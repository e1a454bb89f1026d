"""The layer arrows of style.md, checked on every module's imports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)
ALLOWED: dict[str, set[str]] = {
    "engine": {"engine", "numpy"},
    "ipc": {"ipc", "engine", "zmq", "msgpack"},
    "actors": {"actors", "engine", "ipc", "multiprocess", "psutil", "setproctitle", "zmq", "msgpack",
               "prometheus_client"},
    "pipeline": {"pipeline", "engine", "pyspark", "pyarrow", "numpy", "ipc", "matplotlib", "rich"},
}
# the engine is passive: no sockets, threads, processes or signal handling
ENGINE_FORBIDDEN = {"socket", "threading", "multiprocessing", "subprocess", "signal", "asyncio", "logging"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    for path in sorted((ROOT / layer).rglob("*.py")):
        foreign = {n for n in _imports(path) if n not in STDLIB and n != "__future__"} - ALLOWED[layer]
        assert not foreign, f"{path.relative_to(ROOT)} imports {sorted(foreign)}"


def test_engine_is_passive() -> None:
    for path in sorted((ROOT / "engine").rglob("*.py")):
        used = _imports(path) & ENGINE_FORBIDDEN
        assert not used, f"{path.relative_to(ROOT)} imports {sorted(used)}"


# what crosses a socket is plain data (msgpack through ipc.schema.unpack alone, JSON), never objects
DESERIALIZERS = {"pickle", "dill", "cloudpickle", "marshal", "shelve", "jsonpickle", "yaml"}
EVALUATORS = {"eval", "exec", "compile", "__import__"}
OBJECT_RECEIVERS = {"recv_pyobj", "recv_serialized", "unpackb", "Unpacker"}


def test_nothing_off_a_socket_is_unpickled_or_evaluated() -> None:
    for layer in ("ipc", "actors"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            where = path.relative_to(ROOT)
            assert not _imports(path) & DESERIALIZERS, f"{where} imports {sorted(_imports(path) & DESERIALIZERS)}"
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.id if isinstance(node.func, ast.Name) else (
                    node.func.attr if isinstance(node.func, ast.Attribute) else "")
                assert name not in EVALUATORS, f"{where}:{node.lineno} calls {name}"
                if name in OBJECT_RECEIVERS:
                    assert str(where) == "ipc/schema.py", f"{where}:{node.lineno} decodes with {name}"
                    keywords = {k.arg: k.value for k in node.keywords}
                    assert "ext_hook" not in keywords and "object_hook" not in keywords, f"{where}: hooks"
                    assert all(f"max_{kind}_len" in keywords for kind in ("bin", "str", "array", "map")), where


# the rooms inside the layers: which of the engine's and the actors' packages may use which
def _project_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


ROOMS_FORBIDDEN: dict[str, tuple[str, ...]] = {
    # RabbitMQ's queue index knows nothing of RocketMQ's files
    "engine/ackindex": ("engine.log", "engine.batch", "engine.consumequeue", "engine.keyindex"),
    # the key index and the consume queues are two derived families: neither reads the other
    "engine/keyindex": ("engine.consumequeue", "engine.ackindex"),
    "engine/consumequeue": ("engine.keyindex", "engine.ackindex"),
    # one package per process: an actor's package never imports another actor's
    "actors/writer": ("actors.reader", "actors.remoting", "actors.builder", "actors.flusher", "actors.supervisor"),
    "actors/reader": ("actors.writer", "actors.remoting", "actors.builder", "actors.flusher", "actors.supervisor"),
    "actors/remoting": ("actors.writer", "actors.reader", "actors.builder", "actors.flusher", "actors.supervisor"),
    "actors/metrics": ("actors.writer", "actors.reader", "actors.remoting", "actors.builder", "actors.flusher",
                       "actors.supervisor"),
    "actors/builder.py": ("actors.writer", "actors.reader", "actors.remoting", "actors.flusher", "actors.supervisor"),
    "actors/flusher.py": ("actors.writer", "actors.reader", "actors.remoting", "actors.builder", "actors.supervisor"),
    # the base every actor imports imports no actor (the supervisor owns the registry)
    "actors/runtime.py": ("actors.writer", "actors.reader", "actors.remoting", "actors.builder", "actors.flusher",
                          "actors.supervisor"),
}


@pytest.mark.parametrize("room", sorted(ROOMS_FORBIDDEN))
def test_room_imports_no_sibling_it_must_not(room: str) -> None:
    where = ROOT / room
    paths = sorted(where.rglob("*.py")) if where.is_dir() else [where]
    assert paths, f"{room} is gone: update ROOMS_FORBIDDEN"
    for path in paths:
        bad = {n for n in _project_imports(path) for f in ROOMS_FORBIDDEN[room] if n == f or n.startswith(f + ".")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


MAX_MODULE_LINES = 400


def test_no_module_over_400_lines() -> None:
    """One concept a module (style.md): a module that outgrows this is split, not grown."""
    long = []
    for layer in (*ALLOWED, "scripts"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > MAX_MODULE_LINES:
                long.append(f"{path.relative_to(ROOT)} ({lines} lines)")
    assert not long, "modules over 400 lines: " + ", ".join(long)
