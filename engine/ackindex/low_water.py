"""Low-water marks: the lowest commitlog offset each reader's ack-mode groups still need.

Every queue index lives under ``{store}/queueindex/`` (``QUEUE_INDEX_DIR``), at
``{group}/{topic}/{queue}/``; beside them each reader keeps one mark for the indexes it owns::

    queueindex/lowwater-{reader}.json    {"phys_offset": P}

``P`` is the commitlog offset of the oldest message any group of that reader has not acked, or
``null`` when none is unacked. The reader replaces the file with ``mqstore.engine.meta.metafile.write_atomic``
when its mark moves; the commitlog writer reads every reader's mark when retention runs with
``keep_unacked`` and keeps each file that does not end before the lowest.

With retention's ``reclaim_consumed`` the mark also says, per queue, how far each group got
(``AckProgress``), which ``mqstore.engine.reclaim.consumed`` reads::

    {"phys_offset": P, "queues": [{"group": G, "topic": T, "queue": Q, "acked_below": S,
                                   "indexed_to": I, "unacked_by_file": {"<file base>": N}}]}

``S``: every message below queue offset ``S`` is acked (or was skipped by the group's filter);
``I``: the queue offsets below it were indexed (looked at); ``N``: how many messages the group
holds unacked in the commitlog file starting at that offset, counted where each one is now (a
message moved by ``mqstore.engine.reclaim.move`` counts in its copy's file). A mark without ``queues`` says
nothing of progress: ``mqstore.engine.reclaim.consumed`` then holds the queue's every record.

With retention's ``move_stragglers_below`` a queue may also list where its unacked messages in its
lowest file are, ``"stragglers": [[phys, size], ...]`` (left out when there are more than
``STRAGGLERS_LISTED``): what the writer copies when that file is held by nothing else.

The mark is read through ``mqstore.engine.meta.metafile.read_with_backup``: ``write_atomic`` moves the old mark
to ``.bak`` before the new one takes its place, and a reading taken between the two renames (or after
a crash between them) finds the old mark there, never "no mark". A reader that never wrote a mark,
or none of whose copies reads, has no unacked messages as far as ``unacked_low_water`` is concerned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.meta.metafile import MetafileError, read_with_backup, write_atomic

QUEUE_INDEX_DIR = "queueindex"
STRAGGLERS_LISTED = 1024  # unacked messages of one queue's lowest file listed in the mark, at most


AckKey = tuple[str, str, int]  # (group, topic, queue id)


@dataclass(frozen=True, slots=True)
class AckProgress:
    """How far one ack-mode group got on one queue, as its reader last wrote it."""

    group: str
    topic: str
    queue_id: int
    acked_below: int                   # every queue offset below it is acked (or was filtered out)
    indexed_to: int                    # every queue offset below it was indexed (or filtered out)
    unacked_by_file: Mapping[int, int]  # commitlog file base -> messages held unacked in that file
    stragglers: tuple[tuple[int, int], ...] = ()  # (phys offset, size) of those in the lowest file, if listed

    @property
    def key(self) -> AckKey:
        return (self.group, self.topic, self.queue_id)

    def to_json(self) -> dict[str, object]:
        return {"group": self.group, "topic": self.topic, "queue": self.queue_id, "acked_below": self.acked_below,
                "indexed_to": self.indexed_to,
                "unacked_by_file": {str(base): n for base, n in sorted(self.unacked_by_file.items())},
                **({"stragglers": [list(s) for s in self.stragglers]} if self.stragglers else {})}


def queue_index_keys(store_dir: Path) -> list[AckKey]:
    """Every (group, topic, queue) that has a queue index directory: every ack-mode group's queue."""
    root = store_dir / QUEUE_INDEX_DIR
    keys: list[AckKey] = []
    if root.is_dir():
        for queue_dir in root.glob("*/*/*"):
            if queue_dir.is_dir() and queue_dir.name.isdigit():
                keys.append((queue_dir.parent.parent.name, queue_dir.parent.name, int(queue_dir.name)))
    return sorted(keys)


def low_water_path(store_dir: Path, reader_index: int) -> Path:
    return store_dir / QUEUE_INDEX_DIR / f"lowwater-{reader_index}.json"


def write_low_water(store_dir: Path, reader_index: int, phys_offset: int | None,
                    queues: Sequence[AckProgress] | None = None) -> None:
    """Replace reader ``reader_index``'s mark; an OSError (a failed fsync included) propagates."""
    mark: dict[str, object] = {"phys_offset": phys_offset}
    if queues is not None:
        mark["queues"] = [q.to_json() for q in queues]
    write_atomic(low_water_path(store_dir, reader_index), json.dumps(mark).encode())


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


def _parse_progress(data: bytes) -> list[AckProgress] | None:
    raw = json.loads(data)
    queues = raw.get("queues")
    if queues is None:
        return None
    out = []
    for q in queues:
        fields = (q["acked_below"], q["indexed_to"], q["queue"])
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in fields):
            raise ValueError(f"an ack progress holds a non-integer offset: {q!r}")
        stragglers = tuple((int(phys), int(size)) for phys, size in q.get("stragglers", ()))
        out.append(AckProgress(str(q["group"]), str(q["topic"]), q["queue"], q["acked_below"], q["indexed_to"],
                               {int(base): int(n) for base, n in dict(q["unacked_by_file"]).items()}, stragglers))
    return out


def read_ack_progress(store_dir: Path, reader_count: int) -> dict[AckKey, AckProgress]:
    """Every ack-mode queue's progress from every reader's mark. A queue two marks name (its owner
    changed with the reader count) keeps the one that got less far: it is what may still be needed."""
    progress: dict[AckKey, AckProgress] = {}
    for i in range(reader_count):
        try:
            queues = read_with_backup(low_water_path(store_dir, i), _parse_progress)
        except (OSError, MetafileError):
            continue
        for q in queues or ():
            known = progress.get(q.key)
            if known is None or q.acked_below < known.acked_below:
                progress[q.key] = q
    return progress



def clamp_marks(store_dir: Path, queue_ends: Mapping[tuple[str, int], int], log_end: int) -> list[int]:
    """After a power cut took the log's tail (recovery, before any reader starts): every reader's mark
    brought back within what recovery kept, so retention never reads a queue as acked, or a file as
    held by nothing, on the strength of messages that are gone while new sends take their offsets.
    ``acked_below`` and ``indexed_to`` at most each queue's recovered end, ``phys_offset`` at most the
    log's end. Returns the readers whose mark changed."""
    changed = []
    for path in sorted((store_dir / QUEUE_INDEX_DIR).glob("lowwater-*.json")):
        try:  # an OSError (EIO) propagates: recovery must not go on past a mark it could not bring back
            data = read_with_backup(path, bytes)
        except MetafileError:
            continue  # no copy parses: the readers' own reading refuses it as it did
        try:
            mark = json.loads(data or b"null")
            if not isinstance(mark, dict):
                continue
            before = json.dumps(mark).encode()
            phys = mark.get("phys_offset")
            if isinstance(phys, int) and phys > log_end:
                mark["phys_offset"] = log_end
            for q in mark.get("queues") or ():
                end = queue_ends.get((q["topic"], q["queue"]), 0)
                q["acked_below"], q["indexed_to"] = min(q["acked_below"], end), min(q["indexed_to"], end)
        except (ValueError, KeyError, TypeError):
            continue  # unreadable: the readers' own reading refuses it as it did
        clamped = json.dumps(mark).encode()
        if clamped != before:
            write_atomic(path, clamped)
            changed.append(int(path.stem.removeprefix("lowwater-")))
    return changed
