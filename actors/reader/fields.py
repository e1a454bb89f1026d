"""What every reader op reads the same way: a request's topic (which also names a directory), its
bounded names, the bounds of ids and offsets; and ``SYSTEM_ERROR``, the status a fault is answered
with. A bad field is a ``schema.SchemaError``, which the reader's error boundary answers BAD_REQUEST."""

from __future__ import annotations

from typing import Any

from mqstore.actors.reader.state import LONG_MAX
from mqstore.engine.names import check_topic
from mqstore.ipc.wire import schema

__all__ = ["INT_MAX", "LONG_MAX", "MAX_NAME_CHARS", "MAX_PULL_COUNT", "SYSTEM_ERROR", "name", "topic"]

SYSTEM_ERROR = "SYSTEM_ERROR"
INT_MAX = (1 << 31) - 1            # queue ids
MAX_NAME_CHARS = 1024              # keys, ids, groups, subscription expressions
MAX_PULL_COUNT = 1024              # messages one pull asks for


def topic(message: dict[str, Any]) -> str:
    value: str = schema.field(message, "topic", str)
    reason = check_topic(value)  # also keeps a topic from naming a path outside consumequeue/ or queueindex/
    if reason is not None:
        raise schema.SchemaError(reason)
    return value


def name(message: dict[str, Any], field_name: str, *, default: Any = ...) -> str:
    value: str = schema.field(message, field_name, str, default=default)
    if len(value) > MAX_NAME_CHARS:
        raise schema.SchemaError(f"field {field_name!r} is longer than {MAX_NAME_CHARS} characters")
    return value
