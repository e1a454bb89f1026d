"""Deleted groups: ``{store}/config/deletedGroups.json``, each consumer group deleted with its offsets
(``mqstore groups delete``) and the number of that deletion.

A slave takes its master's committed offsets forward only (a master's older table must never take a
group back over what it consumed), so a deletion has to travel by itself: the master numbers each
deletion (one counter over all groups, rising) and sends this table with its offsets; a slave deletes
a group's offsets when the master's number for it is above its own, then records that number. A
group deleted, made again by new commits and deleted again gets a new number and goes again; one
made again after its deletion keeps its new offsets (the slave saw that deletion already). A
promoted slave's table carries on from the numbers it holds.

The table keeps its ``MAX_DELETED_GROUPS`` newest deletions. The file is JSON, replaced atomically
(``mqstore.engine.meta.metafile.write_atomic``: temp file, fsync, rename, directory fsync)::

    {"deleted": {"OldGroup": 3, "Gone": 4}}
"""

from __future__ import annotations

import json

from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.metafile import StrPath, read_with_backup, write_atomic

DELETED_GROUPS_FILE = "config/deletedGroups.json"
MAX_DELETED_GROUPS = 10_000


class DeletedGroupsError(MqstoreError, ValueError):
    """The file is not a deleted-groups table."""


class DeletedGroups:
    def __init__(self, deleted: dict[str, int] | None = None) -> None:
        self.deleted: dict[str, int] = deleted if deleted is not None else {}

    @classmethod
    def load(cls, path: StrPath) -> DeletedGroups:
        """The table at ``path`` (its ``.bak`` if the file itself is unreadable); empty when neither is there."""
        loaded = read_with_backup(path, decode)
        return loaded if loaded is not None else cls()

    def record(self, group: str) -> int:
        """``group`` deleted here: its deletion gets the next number, which is returned."""
        number = max(self.deleted.values(), default=0) + 1
        self.deleted.pop(group, None)
        self.deleted[group] = number
        self._trim()
        return number

    def newer(self, group: str, number: int) -> bool:
        """Whether another broker's deletion ``number`` of ``group`` is one this table has not seen."""
        return number > self.deleted.get(group, 0)

    def take(self, group: str, number: int) -> None:
        """Another broker's deletion of ``group``, applied here."""
        if self.newer(group, number):
            self.deleted[group] = number
            self._trim()

    def _trim(self) -> None:
        if len(self.deleted) > MAX_DELETED_GROUPS:
            kept = sorted(self.deleted.items(), key=lambda item: item[1])[-MAX_DELETED_GROUPS:]
            self.deleted = dict(kept)

    def encode(self) -> bytes:
        return json.dumps({"deleted": dict(sorted(self.deleted.items()))}, indent=1).encode()

    def persist(self, path: StrPath) -> None:
        """Write the whole table atomically; OSErrors propagate."""
        write_atomic(path, self.encode())


def decode(data: bytes) -> DeletedGroups:
    try:
        raw = json.loads(data)["deleted"]
        table = {str(group): int(number) for group, number in raw.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DeletedGroupsError(f"not a deleted-groups table: {exc}") from None
    if any(number < 1 for number in table.values()):
        raise DeletedGroupsError("a deletion number is below 1")
    return DeletedGroups(table)
