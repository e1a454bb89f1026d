"""Every exception the project defines is an ``MqstoreError``: one ``except`` catches whatever mqstore
raised, and a new class cannot forget the base."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from mqstore.engine.errors import MqstoreError

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "ipc", "actors", "pipeline", "scripts")


def _error_classes() -> list[tuple[str, str]]:
    """(module, class name) of every class whose name ends in ``Error``, found in the source."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(("mqstore", *(parts[:-1] if parts[-1] == "__init__" else parts)))
            tree = ast.parse(path.read_text(), filename=str(path))
            found.extend((module, node.name) for node in ast.walk(tree)
                         if isinstance(node, ast.ClassDef) and node.name.endswith("Error"))
    return found


ERRORS = _error_classes()


def test_the_walk_finds_the_errors() -> None:
    """The walk sees the classes (a path or naming change that found none would pass every case below)."""
    names = {name for _, name in ERRORS}
    assert {"GeometryError", "BrokerTimeoutError", "ConfigError", "ProjectionError", "MqstoreError"} <= names
    assert len(ERRORS) >= 40


@pytest.mark.parametrize(("module", "name"), ERRORS, ids=[f"{m}.{n}" for m, n in ERRORS])
def test_every_error_is_an_mqstore_error(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, MqstoreError), f"{module}.{name} does not derive from MqstoreError"


def test_error_names_are_unique() -> None:
    """Two classes of one name (there were two ``SchemaError``s) make ``except`` read as what it is not."""
    seen: dict[str, str] = {}
    for module, name in ERRORS:
        assert name not in seen, f"{name} is defined in {seen[name]} and {module}"
        seen[name] = module


def test_the_standard_bases_stay_where_callers_catch_them() -> None:
    from mqstore.engine.config import GeometryError
    from mqstore.engine.log.mapped_file import MappedFileError
    from mqstore.ipc.transport.exchange import BrokerTimeoutError
    from mqstore.pipeline.reader import StoreNotFoundError

    assert issubclass(GeometryError, ValueError)
    assert issubclass(BrokerTimeoutError, TimeoutError)
    assert issubclass(MappedFileError, OSError)
    assert issubclass(StoreNotFoundError, FileNotFoundError)


def test_the_base_is_public() -> None:
    import mqstore

    assert mqstore.MqstoreError is MqstoreError
    assert "MqstoreError" in mqstore.__all__
