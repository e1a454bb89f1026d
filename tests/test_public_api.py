"""The public API, ``import mqstore``: its names are frozen, so renaming one is a deliberate act here."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import mqstore
import mqstore.aio

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = [
    "AckConsumer",
    "AckStatus",
    "Admin",
    "BrokerError",
    "BrokerTimeoutError",
    "Consumer",
    "Delivery",
    "EncodingError",
    "Endpoints",
    "GeometryError",
    "GetResult",
    "GetStatus",
    "Message",
    "MessageBatch",
    "MessageStore",
    "MqstoreError",
    "Outgoing",
    "Producer",
    "PutResult",
    "PutStatus",
    "QueueLag",
    "Receipt",
    "ReceivedMessage",
    "ReplyError",
    "SendResult",
    "SendResults",
    "StoreConfig",
    "StoreLockedError",
    "TransactionResult",
    "TransactionState",
    "__version__",
]


# ``mqstore.aio``: the clients for asyncio, one for each blocking client of the same name
AIO = ["AckConsumer", "Admin", "Consumer", "Producer"]
# a consumer's own bookkeeping, which asks nothing of the broker: plain calls in both
AIO_LOCAL = {"position", "seek", "buffered"}


def test_all_is_exactly_the_frozen_list() -> None:
    assert mqstore.__all__ == PUBLIC


def test_dir_lists_the_public_names() -> None:
    assert sorted(dir(mqstore)) == sorted(PUBLIC)


@pytest.mark.parametrize("name", [n for n in PUBLIC if n != "__version__"])
def test_each_name_is_the_object_its_home_module_defines(name: str) -> None:
    home = mqstore._HOMES[name]
    value = getattr(mqstore, name)
    assert value is getattr(importlib.import_module(home), name)
    assert inspect.isclass(value) and value.__module__ == home, f"{name} is defined in {value.__module__}"


def test_the_table_names_every_public_name_and_nothing_else() -> None:
    assert sorted(mqstore._HOMES) == sorted(n for n in PUBLIC if n != "__version__")


def test_version_is_a_string_and_an_unknown_name_is_an_attribute_error() -> None:
    assert isinstance(mqstore.__version__, str) and mqstore.__version__
    with pytest.raises(AttributeError, match="no attribute 'Engine'"):
        mqstore.Engine  # noqa: B018
    assert not hasattr(mqstore, "engine_store")


def test_errors_keep_the_standard_bases_callers_catch() -> None:
    assert issubclass(mqstore.BrokerTimeoutError, TimeoutError)
    for name in ("EncodingError", "GeometryError", "ReplyError"):
        assert issubclass(getattr(mqstore, name), ValueError), name


def test_statuses_are_str_enums() -> None:
    for status in (mqstore.PutStatus, mqstore.GetStatus, mqstore.AckStatus):
        assert all(isinstance(member, str) and member == member.name for member in status)


def _modules_after(code: str) -> list[str]:
    """The modules a fresh interpreter, in this checkout's root, has loaded after ``code``."""
    out = subprocess.run([sys.executable, "-c", f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
    return list(json.loads(out.splitlines()[-1]))


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in ("zmq", "numpy", "msgpack", "pyspark")
            or m == "mqstore.actors" or m.startswith("mqstore.actors.")]


def test_import_mqstore_alone_loads_no_zmq_numpy_or_actor() -> None:
    loaded = _modules_after("import mqstore\nassert mqstore.__all__")
    assert "mqstore" in loaded
    assert _heavy(loaded) == []
    # the check can fail: touching a client name does load the transport
    assert "zmq" in _heavy(_modules_after("import mqstore\nmqstore.Producer"))


def test_aio_all_is_exactly_the_frozen_list() -> None:
    assert mqstore.aio.__all__ == AIO
    assert all(getattr(mqstore.aio, name).__module__.startswith("mqstore.ipc.client.aio.") for name in AIO)


@pytest.mark.parametrize("name", AIO)
def test_each_aio_client_takes_its_blocking_clients_arguments_and_awaits_its_calls(name: str) -> None:
    asynchronous, blocking = getattr(mqstore.aio, name), getattr(mqstore, name)
    assert inspect.signature(asynchronous.__init__) == inspect.signature(blocking.__init__)
    calls = [n for n, member in inspect.getmembers(blocking, inspect.isfunction)
             if not n.startswith("_") and not n.endswith("_async")]
    assert "close" in calls
    for call in calls:
        member = getattr(asynchronous, call, None)
        if call in AIO_LOCAL:
            assert inspect.isfunction(member) and not inspect.iscoroutinefunction(member), f"{name}.{call}"
        else:
            assert inspect.iscoroutinefunction(member), f"{name}.{call} is not awaitable"
    assert inspect.iscoroutinefunction(asynchronous.__aenter__) and inspect.iscoroutinefunction(asynchronous.__aexit__)
    if hasattr(blocking, "__iter__"):  # the consumers: ``for`` there, ``async for`` here
        assert inspect.iscoroutinefunction(asynchronous.__anext__)


@pytest.mark.parametrize("producer", [mqstore.Producer, mqstore.aio.Producer])
def test_producers_flush_and_close_within_a_timeout(producer: type) -> None:
    """``flush(timeout_s)`` (Kafka's), and ``close(timeout_s)`` that flushes first: part of the API on purpose."""
    for call in ("flush", "close"):
        parameters = inspect.signature(getattr(producer, call)).parameters
        assert list(parameters) == ["self", "timeout_s"] and parameters["timeout_s"].default is None, call
