"""Low-water marks: the lowest commitlog offset each reader's ack-mode groups still need.

Every queue index lives under ``{store}/queueindex/`` (``QUEUE_INDEX_DIR``), at
``{group}/{topic}/{queue}/``; beside them each reader keeps one mark for the indexes it owns::

    queueindex/lowwater-{reader}.json    {"phys_offset": P}

``P`` is the commitlog offset of the oldest message any group of that reader has not acked, or
``null`` when none is unacked. The reader replaces the file with ``engine.metafile.write_atomic``
when its mark moves; the commitlog writer reads every reader's mark when retention runs with
``keep_unacked`` and keeps each file that does not end before the lowest.

A reader that never wrote a mark, or whose mark does not read, has no unacked messages as far as
``unacked_low_water`` is concerned.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.metafile import write_atomic

QUEUE_INDEX_DIR = "queueindex"


def low_water_path(store_dir: Path, reader_index: int) -> Path:
    return store_dir / QUEUE_INDEX_DIR / f"lowwater-{reader_index}.json"


def write_low_water(store_dir: Path, reader_index: int, phys_offset: int | None) -> None:
    """Replace reader ``reader_index``'s mark; an OSError (a failed fsync included) propagates."""
    write_atomic(low_water_path(store_dir, reader_index), json.dumps({"phys_offset": phys_offset}).encode())


def read_low_water(store_dir: Path, reader_index: int) -> int | None:
    """Reader ``reader_index``'s mark; None when it has none (no file, ``null``, or no valid mark)."""
    try:
        raw = json.loads(low_water_path(store_dir, reader_index).read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(raw, dict) and isinstance(raw.get("phys_offset"), int):
        phys_offset: int = raw["phys_offset"]
        return phys_offset
    return None


def unacked_low_water(store_dir: Path, reader_count: int) -> int | None:
    """The lowest commitlog offset any ack-mode group still needs, from every reader's mark (None
    when no reader has one). A reader that never wrote a mark has no unacked messages."""
    marks = [mark for i in range(reader_count) if (mark := read_low_water(store_dir, i)) is not None]
    return min(marks) if marks else None
