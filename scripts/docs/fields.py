"""What the source says of a configuration dataclass: each field's comment, and what validation
says of a value out of range.

A field's description is the comment beside it: a comment block just above the field (at the
field's indentation), then the comment on its line and the comment-only lines below it that start
in that comment's column. A field's bounds are found by asking validation itself: the whole
configuration tree is built with that one value changed to something extreme (far below and far
above for a number, a nonsense string for a string) and the error ``BrokerConfig.validate`` raises
is kept when it names the key. What no check refuses has no bounds to show.
"""

from __future__ import annotations

import copy
import inspect
import io
import re
import tokenize
import typing
from dataclasses import MISSING, Field, fields, is_dataclass
from typing import Any

from mqstore.actors.config import BrokerConfig, ConfigError

BAD_STRING = "\x01probe"
# far below, the least a check may refuse past "not negative", and far above
NUMBER_PROBES: dict[type, tuple[Any, ...]] = {int: (-(1 << 40), 0, 1 << 40), float: (-1.0, 0.0, 2.0)}
NOT_NEGATIVE = "must not be negative"
_FIELD = re.compile(r"^(\s+)(\w+)\s*:")
_GOT = re.compile(r",? got .*$", re.S)


def field_comments(cls: type) -> dict[str, str]:
    """Each field of ``cls`` with the comment the source puts beside it ("" where none)."""
    source = inspect.getsource(cls)
    lines = source.splitlines()
    comments: dict[int, tuple[int, str]] = {}  # row (0-based) -> (column, text)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0] - 1] = (token.start[1], token.string.lstrip("#").strip())
    names = {f.name for f in fields(cls)}
    found: dict[str, str] = {}
    for row, line in enumerate(lines):
        match = _FIELD.match(line)
        if match is None or match.group(2) not in names:
            continue
        indent = len(match.group(1))
        above: list[str] = []
        up = row - 1
        while up >= 0 and up in comments and comments[up][0] == indent and not lines[up][:indent].strip():
            above.insert(0, comments[up][1])
            up -= 1
        beside: list[str] = []
        if row in comments and comments[row][0] > indent:
            column = comments[row][0]
            beside.append(comments[row][1])
            down = row + 1
            while down in comments and comments[down][0] == column and not lines[down][:column].strip():
                beside.append(comments[down][1])
                down += 1
        found[match.group(2)] = " — ".join(part for part in (" ".join(above), " ".join(beside)) if part)
    return {name: found.get(name, "") for name in names}


def type_name(hint: Any) -> str:
    options = typing.get_args(hint)
    if options:
        (inner,) = [t for t in options if t is not type(None)]
        return f"{type_name(inner)} (optional)"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(hint, str(hint))


def default_of(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def bounds(path: list[str], hint: Any) -> str:
    """What validation says of extreme values of the key at ``path`` (section first), one sentence
    per distinct rule; "" when it refuses none of them."""
    options = typing.get_args(hint)
    if options:
        (hint,) = [t for t in options if t is not type(None)]
    probes = NUMBER_PROBES.get(hint, (BAD_STRING,) if hint is str else ())
    said: list[str] = []
    for value in probes:
        message = _refusal(path, value)
        if message and message not in said:
            said.append(message)
    if NOT_NEGATIVE in said and len(said) > 1:  # a stricter lower bound said it too
        said.remove(NOT_NEGATIVE)
    return "; ".join(said)


def _refusal(path: list[str], value: Any) -> str:
    raw: dict[str, Any] = {"store_dir": "/nonexistent/mqstore-docs-probe"}
    table = raw
    for key in path[:-1]:
        table = table.setdefault(key, {})
    if path[:2] == ["store", "store_host"]:
        table.update({"ip": "127.0.0.1", "port": 10911})
    table[path[-1]] = value
    try:
        BrokerConfig.from_dict(copy.deepcopy(raw))
    except (ConfigError, ValueError, TypeError) as exc:
        message = str(exc)
    else:
        return ""
    key = path[-1]
    if key not in message:
        return ""
    message = _GOT.sub("", message)
    if isinstance(value, str):  # a number shows only in the ", got ..." just cut
        message = message.replace(repr(value), "…").replace(value, "…")
    else:  # or in a bound that is another key's value: "between 1 and broker.max_queues (1024)"
        message = message.replace(f" ({value})", "")
    for prefix in (".".join(path) + " ", f"[{path[0]}] ", ".".join(path) + ": "):
        if message.startswith(prefix):
            message = message[len(prefix):]
            break
    return message.strip()


def nested(cls: type) -> dict[str, type]:
    """The fields of ``cls`` that are tables of their own (dataclasses)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls) if is_dataclass(hints[f.name])}
