"""The layer arrows of style.md, checked on every module's imports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STDLIB = set(sys.stdlib_module_names)
ALLOWED: dict[str, set[str]] = {
    "engine": {"mqstore.engine", "numpy"},
    "ipc": {"mqstore.ipc", "mqstore.engine", "zmq", "msgpack"},
    "actors": {"mqstore.actors", "mqstore.engine", "mqstore.ipc", "multiprocess", "psutil", "setproctitle", "zmq",
               "msgpack", "prometheus_client", "yaml"},
    "pipeline": {"mqstore.pipeline", "mqstore.engine", "pyspark", "pyarrow", "numpy", "mqstore.ipc", "matplotlib",
                 "rich"},
}
# the card's folders install under one import name: nothing imports them by their folder's name
CARD = ("engine", "actors", "ipc", "pipeline", "scripts")
# the engine is passive: no sockets, threads, processes or signal handling
ENGINE_FORBIDDEN = {"socket", "threading", "multiprocessing", "subprocess", "signal", "asyncio", "logging"}


def _top(name: str) -> str:
    """A distribution's import name, or for the project's own, the layer (``mqstore.engine``)."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "mqstore" else parts[0]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(_top(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(_top(node.module))
    return names


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    for path in sorted((ROOT / layer).rglob("*.py")):
        foreign = {n for n in _imports(path) if n not in STDLIB and n != "__future__"} - ALLOWED[layer]
        assert not foreign, f"{path.relative_to(ROOT)} imports {sorted(foreign)}"


@pytest.mark.parametrize("folder", [*CARD, "tests", "mqstore"])
def test_everything_imports_the_project_as_mqstore(folder: str) -> None:
    """``import engine`` would work from a checkout and fail from a wheel (and shadow a user's own
    ``engine.py``): the project is imported by its one name, ``mqstore``, everywhere, tests included."""
    for path in sorted((ROOT / folder).rglob("*.py")):
        bare = {n for n in _imports(path) if n in CARD}
        assert not bare, f"{path.relative_to(ROOT)} imports {sorted(bare)} by its folder's name"
        tree = ast.parse(path.read_text(), filename=str(path))
        relative = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
        assert not relative, f"{path.relative_to(ROOT)}:{relative} imports relatively"


def test_the_import_name_links_the_card_folders() -> None:
    """mqstore/ holds the package's __init__ and py.typed, the asyncio clients' names (aio.py), and one
    link per card folder."""
    links = {p.name: p for p in (ROOT / "mqstore").iterdir() if p.is_symlink()}
    assert sorted(links) == sorted(CARD)
    assert all(links[name].resolve() == (ROOT / name).resolve() for name in CARD)
    assert (ROOT / "mqstore" / "py.typed").is_file()
    files = {p.name for p in (ROOT / "mqstore").iterdir() if p.is_file() and not p.is_symlink()}
    assert files == {"__init__.py", "aio.py", "py.typed"}


def test_engine_is_passive() -> None:
    for path in sorted((ROOT / "engine").rglob("*.py")):
        used = _imports(path) & ENGINE_FORBIDDEN
        assert not used, f"{path.relative_to(ROOT)} imports {sorted(used)}"


# what crosses a socket is plain data (msgpack through mqstore.ipc.wire.schema.unpack alone, JSON), never objects
DESERIALIZERS = {"pickle", "dill", "cloudpickle", "marshal", "shelve", "jsonpickle", "yaml"}
EVALUATORS = {"eval", "exec", "compile", "__import__"}
OBJECT_RECEIVERS = {"recv_pyobj", "recv_serialized", "unpackb", "Unpacker"}


# the one YAML reader: RocketMQ's plain_acl.yml, a local file, read with BaseLoader (strings, lists, maps)
YAML_READERS = {"actors/remoting/acl_file.py"}


def test_nothing_off_a_socket_is_unpickled_or_evaluated() -> None:
    for layer in ("ipc", "actors"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            where = path.relative_to(ROOT)
            allowed = {"yaml"} if str(where) in YAML_READERS else set()
            unsafe = _imports(path) & DESERIALIZERS - allowed
            assert not unsafe, f"{where} imports {sorted(unsafe)}"
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.id if isinstance(node.func, ast.Name) else (
                    node.func.attr if isinstance(node.func, ast.Attribute) else "")
                assert name not in EVALUATORS, f"{where}:{node.lineno} calls {name}"
                if name in OBJECT_RECEIVERS:
                    assert str(where) == "ipc/wire/schema.py", f"{where}:{node.lineno} decodes with {name}"
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


_ACTOR_PACKAGES = ("writer", "reader", "remoting", "builder", "flusher", "supervisor", "metrics", "scheduler",
                   "timer", "transactions", "ha")


def _other_actors(own: str) -> tuple[str, ...]:
    return tuple(f"mqstore.actors.{name}" for name in _ACTOR_PACKAGES if name != own)


ROOMS_FORBIDDEN: dict[str, tuple[str, ...]] = {
    # RabbitMQ's queue index knows nothing of RocketMQ's files
    "engine/ackindex": ("mqstore.engine.log", "mqstore.engine.batch", "mqstore.engine.consumequeue",
                        "mqstore.engine.keyindex"),
    # the key index and the consume queues are two derived families: neither reads the other
    "engine/keyindex": ("mqstore.engine.consumequeue", "mqstore.engine.ackindex"),
    "engine/consumequeue": ("mqstore.engine.keyindex", "mqstore.engine.ackindex"),
    # Java's semantics and the small metadata files are leaves: nothing of the store's files
    "engine/java": ("mqstore.engine.log", "mqstore.engine.batch", "mqstore.engine.consumequeue",
                    "mqstore.engine.keyindex", "mqstore.engine.meta", "mqstore.engine.read"),
    "engine/meta": ("mqstore.engine.log", "mqstore.engine.batch", "mqstore.engine.consumequeue",
                    "mqstore.engine.keyindex", "mqstore.engine.read", "mqstore.engine.repair",
                    "mqstore.engine.config"),
    # the commitlog and its files are the lower room: a batch, the put path (the writer), the derived
    # files and the configuration are built on them, never the other way
    "engine/log": ("mqstore.engine.batch", "mqstore.engine.put", "mqstore.engine.config", "mqstore.engine.delay",
                   "mqstore.engine.consumequeue", "mqstore.engine.keyindex", "mqstore.engine.store"),
    # many records as columns sit below the put path: the writer and its plan for a batch use them
    "engine/batch": ("mqstore.engine.put", "mqstore.engine.store"),
    # the leaves every room may import: the error base, the name rules, what a queue entry says
    "engine/errors.py": ("mqstore.engine",),
    "engine/names.py": ("mqstore.engine",),
    "engine/consumequeue/entry.py": ("mqstore.engine",),
    # the ipc rooms: the contract knows no transport, the transport no client, the remoting codec neither
    "ipc/wire": ("mqstore.ipc.transport", "mqstore.ipc.client", "mqstore.ipc.remoting"),
    "ipc/transport": ("mqstore.ipc.client", "mqstore.ipc.remoting"),
    "ipc/remoting": ("mqstore.ipc.transport", "mqstore.ipc.client", "mqstore.ipc.wire"),
    "ipc/client": ("mqstore.ipc.remoting",),
    # one package per process: an actor's package never imports another actor's
    **{f"actors/{name}": _other_actors(name) for name in ("writer", "reader", "remoting", "metrics", "scheduler",
                                                           "timer", "transactions", "ha")},
    "actors/builder.py": _other_actors("builder"),
    "actors/flusher.py": _other_actors("flusher"),
    "actors/readiness.py": _other_actors(""),
    # the base every actor imports imports no actor (the supervisor owns the registry)
    "actors/runtime.py": _other_actors(""),
}


def test_the_yaml_reader_constructs_nothing_but_strings() -> None:
    """yaml.load with any loader but BaseLoader builds Python objects (or, unsafe, runs code)."""
    for name in YAML_READERS:
        tree = ast.parse((ROOT / name).read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "yaml"]
        assert calls, f"{name} reads no YAML: update YAML_READERS"
        for call in calls:
            loader = {k.arg: k.value for k in call.keywords}.get("Loader")
            assert call.func.attr == "load" and isinstance(loader, ast.Attribute) and loader.attr == "BaseLoader", (
                f"{name}:{call.lineno} yaml.{call.func.attr} without Loader=yaml.BaseLoader")


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
