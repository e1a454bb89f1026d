"""Low-water marks: the lowest commitlog offset each reader's ack-mode groups still need.

Every queue index lives under ``{store}/queueindex/`` (``QUEUE_INDEX_DIR``), at
``{group}/{topic}/{queue}/``; beside them each reader keeps one mark for the indexes it owns::

    queueindex/lowwater-{reader}.json    {"phys_offset": P}

``P`` is the commitlog offset of the oldest message any group of that reader has not acked, or
``null`` when none is unacked. The reader replaces the file with ``engine.metafile.write_atomic``
when its mark moves; the commitlog writer reads every reader's mark when retention runs with
``keep_unacked`` and keeps each file that does not end before the lowest.

The mark is read through ``engine.metafile.read_with_backup``: ``write_atomic`` moves the old mark
to ``.bak`` before the new one takes its place, and a reading taken between the two renames (or after
a crash between them) finds the old mark there, never "no mark". A reader that never wrote a mark,
or none of whose copies reads, has no unacked messages as far as ``unacked_low_water`` is concerned.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.metafile import MetafileError, read_with_backup, write_atomic

QUEUE_INDEX_DIR = "queueindex"


def low_water_path(store_dir: Path, reader_index: int) -> Path:
    return store_dir / QUEUE_INDEX_DIR / f"lowwater-{reader_index}.json"


def write_low_water(store_dir: Path, reader_index: int, phys_offset: int | None) -> None:
    """Replace reader ``reader_index``'s mark; an OSError (a failed fsync included) propagates."""
    write_atomic(low_water_path(store_dir, reader_index), json.dumps({"phys_offset": phys_offset}).encode())


def read_low_water(store_dir: Path, reader_index: int) -> int | None:
    """Reader ``reader_index``'s mark; None when it has none (no file, ``null``, or no valid mark)."""
    try:
        return read_with_backup(low_water_path(store_dir, reader_index), _parse_mark)
    except (OSError, MetafileError):
        return None


def _parse_mark(data: bytes) -> int | None:
    raw = json.loads(data)
    phys_offset = raw["phys_offset"]
    if phys_offset is not None and (not isinstance(phys_offset, int) or isinstance(phys_offset, bool)):
        raise ValueError(f"phys_offset is not an offset: {phys_offset!r}")
    return phys_offset


def unacked_low_water(store_dir: Path, reader_count: int) -> int | None:
    """The lowest commitlog offset any ack-mode group still needs, from every reader's mark (None
    when no reader has one). A reader that never wrote a mark has no unacked messages."""
    marks = [mark for i in range(reader_count) if (mark := read_low_water(store_dir, i)) is not None]
    return min(marks) if marks else None
