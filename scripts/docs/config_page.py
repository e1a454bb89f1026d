"""``docs/reference/config.md``, written from the configuration schema (``mqstore.actors.config.SECTIONS``).

Every section and key: its type and default (the dataclass), its bounds (what validation refuses,
``mqstore.scripts.docs.fields.bounds``), the comment beside it in the source, and the RocketMQ
setting it stands for (``mqstore.scripts.docs.rocketmq_names``).
"""

from __future__ import annotations

import json
import re
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

import mqstore.actors.config as config_module
from mqstore.actors.config import SECTIONS
from mqstore.scripts.docs.fields import bounds, default_of, field_comments, nested, type_name
from mqstore.scripts.docs.markdown import GENERATED_NOTE, cell, table
from mqstore.scripts.docs.rocketmq_names import ROCKETMQ_NAMES

PAGE = "reference/config.md"
COMMAND = "python -m mqstore.scripts.docs"
_SECTION_LINE = re.compile(r"^    \[(\w+)\]\s+(.*)$")
TABLE_NOTES = {
    "store.geometry": "Saved with the store when it is created (`config/storeGeometry.json`); opening a store "
                      "with another geometry is an error, and without `[store.geometry]` the store's own is used.",
    "store.store_host": "The address written into each record (STOREHOST). Unset, it is the remoting front's "
                        "advertised address when the front is on, else 127.0.0.1:10911.",
}


def section_summaries() -> dict[str, str]:
    """The one-line account of each section in ``mqstore.actors.config``'s docstring."""
    summaries: dict[str, list[str]] = {}
    current = ""
    for line in (config_module.__doc__ or "").splitlines():
        match = _SECTION_LINE.match(line)
        if match:
            current = match.group(1)
            summaries[current] = [match.group(2).strip()]
        elif current and line.startswith("      ") and line.strip():
            summaries[current].append(line.strip())
        else:
            current = ""
    return {name: " ".join(parts) for name, parts in summaries.items()}


def shown_default(value: Any, key: str) -> str:
    if value is MISSING:
        return "(required)"
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f"`{json.dumps(value)}`"
    text = f"`{value}`"
    if isinstance(value, int) and key.endswith(("_bytes", "_size")) and value >= 1024 and value % 1024 == 0:
        size, unit = value, "B"
        for bigger in ("KiB", "MiB", "GiB"):
            if size % 1024:
                break
            size, unit = size // 1024, bigger
        text += f" ({size} {unit})"
    return text


def key_rows(cls: type, path: list[str]) -> list[list[str]]:
    hints = typing.get_type_hints(cls)
    comments = field_comments(cls)
    rows = []
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            continue
        dotted = ".".join([*path, f.name])
        rows.append([f"`{f.name}`", type_name(hints[f.name]), shown_default(default_of(f), f.name),
                     cell(bounds([*path, f.name], hints[f.name])) or "—", cell(comments[f.name]) or "—",
                     f"`{ROCKETMQ_NAMES[dotted].split(' ', 1)[0]}`" + _note(ROCKETMQ_NAMES[dotted])
                     if dotted in ROCKETMQ_NAMES else "—"])
    return rows


def _note(entry: str) -> str:
    rest = entry.split(" ", 1)[1] if " " in entry else ""
    return f" {cell(rest)}" if rest else ""


HEADER = ["Key", "Type", "Default", "Bounds (what validation refuses)", "Description", "RocketMQ"]


def render() -> str:
    summaries = section_summaries()
    out = [
        "# Configuration reference", "", GENERATED_NOTE.format(command=COMMAND), "",
        "A broker reads one TOML file (`mqstore start --config FILE`); every key is optional and an unknown "
        "section or key, or a value of another type, stops the start with an error naming the key's path. "
        "The flags of `mqstore start` override the file (see the [CLI reference](cli.md)). How to choose "
        "values is in [Configuration](../operations/configuration.md).", "",
        "*Bounds* are what the configuration's validation says of a value out of range, found by asking it; "
        "a key it accepts any value of shows —. Sizes are bytes, durations carry their unit in the name.", "",
    ]
    for name, cls in SECTIONS.items():
        out += [f"## `[{name}]`", ""]
        if summaries.get(name):
            out += [summaries[name], ""]
        out += table(HEADER, key_rows(cls, [name]))
        for child, child_cls in nested(cls).items():
            dotted = f"{name}.{child}"
            out += ["", f"### `[{dotted}]`", ""]
            if dotted in TABLE_NOTES:
                out += [TABLE_NOTES[dotted], ""]
            out += table(HEADER, key_rows(child_cls, [name, child]))
        out.append("")
    out += ["## Environment", "",
            f"`{config_module.LOG_LEVEL_VARIABLE}`: the log level of every actor, one of "
            f"{', '.join(f'`{level}`' for level in config_module.LOG_LEVELS)} (any case; `INFO` when unset).", ""]
    return "\n".join(out)
