"""``config/delayOffset.json``: how far the scheduler delivered each delay level, in RocketMQ's format.

    {
        "dataVersion":{"counter":N,"stateVersion":0,"timestamp":ms},
        "offsetTable":{1:5,2:0}
    }

RocketMQ writes it with fastjson: the keys of ``offsetTable`` are delay levels (1-based) written as
unquoted integers (not strict JSON), each value the next queue offset to examine in the schedule
topic's queue level - 1. This module writes the same text and reads it back whether the keys are
quoted or not, with or without ``dataVersion`` (RocketMQ 4 has none). Written atomically
(``mqstore.engine.meta.metafile``: tmp, fsync, rename, ``.bak``), read with the backup as fallback.

Beside it, ``config/delayReput.json`` holds ``{"commitlogFrom": phys_offset}``: a commitlog offset at
or below every re-put the scheduler may have made past the offsets of ``delayOffset.json``
(``mqstore.actors.scheduler`` writes it after that file, and scans from there on a restart).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.engine.meta.metafile import read_with_backup, write_atomic

DELAY_OFFSET_FILE = "config/delayOffset.json"
REPUT_FLOOR_FILE = "config/delayReput.json"
_BARE_KEY = re.compile(rb"([{,]\s*)(-?[0-9]+)(\s*:)")


@dataclass(frozen=True, slots=True)
class DelayOffsets:
    """Next schedule-queue offset per delay level, and the file's data version counter."""

    offsets: dict[int, int]
    counter: int = 0


def encode_delay_offsets(offsets: Mapping[int, int], counter: int, now_ms: int) -> bytes:
    table = ",".join(f"{level}:{offset}" for level, offset in sorted(offsets.items()))
    return (f'{{\n\t"dataVersion":{{\n\t\t"counter":{counter},\n\t\t"stateVersion":0,\n\t\t"timestamp":{now_ms}\n\t}},'
            f'\n\t"offsetTable":{{{table}}}\n}}').encode()


def decode_delay_offsets(data: bytes) -> DelayOffsets:
    """Parse the file; ValueError / KeyError / TypeError on content that is not the table."""
    doc: Any = json.loads(_BARE_KEY.sub(rb'\1"\2"\3', data))
    table = doc["offsetTable"]
    if not isinstance(table, dict):
        raise TypeError("offsetTable is not an object")
    offsets = {int(level): int(offset) for level, offset in table.items()}
    version = doc.get("dataVersion") or {}
    return DelayOffsets(offsets, int(version.get("counter", 0)))


def read_delay_offsets(store_dir: Path) -> DelayOffsets:
    saved = read_with_backup(store_dir / DELAY_OFFSET_FILE, decode_delay_offsets)
    return saved if saved is not None else DelayOffsets({})


def write_delay_offsets(store_dir: Path, offsets: Mapping[int, int], counter: int, now_ms: int) -> None:
    write_atomic(store_dir / DELAY_OFFSET_FILE, encode_delay_offsets(offsets, counter, now_ms))


def read_reput_floor(store_dir: Path) -> int | None:
    return read_with_backup(store_dir / REPUT_FLOOR_FILE, _decode_floor)


def write_reput_floor(store_dir: Path, phys_offset: int) -> None:
    write_atomic(store_dir / REPUT_FLOOR_FILE, json.dumps({"commitlogFrom": phys_offset}).encode())


def _decode_floor(data: bytes) -> int:
    value = json.loads(data)["commitlogFrom"]
    if not isinstance(value, int):
        raise TypeError(f"commitlogFrom is {value!r}")
    return value


