"""Purged queues: ``{store}/config/purgedQueues.json``, how far each purged queue was emptied.

``mqstore queues purge`` empties a queue for its consumers the way RabbitMQ's ``purge_queue`` does,
while the records stay in the commitlog until retention: each purged (topic, queue) gets a floor,
the queue's end when it was purged, and a pull below the floor reads from the floor instead (as if
retention had taken what lies below). Floors only rise. The file is JSON, replaced atomically
(``mqstore.engine.meta.metafile.write_atomic``: temp file, fsync, rename, directory fsync)::

    {"floors": {"Orders": {"0": 120, "3": 7}}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from mqstore.engine.errors import MqstoreError
from mqstore.engine.meta.metafile import StrPath, read_with_backup, write_atomic

PURGED_QUEUES_FILE = "config/purgedQueues.json"


class PurgedQueuesError(MqstoreError, ValueError):
    """The file is not a purged-queues table."""


class PurgedQueues:
    def __init__(self, floors: dict[str, dict[int, int]] | None = None) -> None:
        self.floors: dict[str, dict[int, int]] = floors if floors is not None else {}

    @classmethod
    def load(cls, path: StrPath) -> PurgedQueues:
        """The table at ``path`` (its ``.bak`` if the file itself is unreadable); empty when neither is there."""
        loaded = read_with_backup(path, decode)
        return loaded if loaded is not None else cls()

    def floor(self, topic: str, queue_id: int) -> int:
        """The queue's floor, 0 when it was never purged."""
        queues = self.floors.get(topic)
        return queues.get(queue_id, 0) if queues is not None else 0

    def raise_floors(self, topic: str, floors: Iterable[tuple[int, int]]) -> bool:
        """Each (queue id, floor) taken where it is above the queue's floor; whether one rose."""
        rose = False
        for queue_id, floor in floors:
            if floor > self.floor(topic, queue_id):
                self.floors.setdefault(topic, {})[queue_id] = floor
                rose = True
        return rose

    def encode(self) -> bytes:
        table = {topic: {str(q): f for q, f in sorted(queues.items())} for topic, queues in sorted(self.floors.items())}
        return json.dumps({"floors": table}, indent=1).encode()

    def persist(self, path: StrPath) -> None:
        """Write the whole table atomically; OSErrors propagate."""
        write_atomic(path, self.encode())


def decode(data: bytes) -> PurgedQueues:
    try:
        raw = json.loads(data)
        floors = raw["floors"]
        table = {str(topic): {int(q): int(f) for q, f in queues.items()} for topic, queues in floors.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PurgedQueuesError(f"not a purged-queues table: {exc}") from None
    if any(q < 0 or f < 0 for queues in table.values() for q, f in queues.items()):
        raise PurgedQueuesError("a queue id or floor is negative")
    return PurgedQueues(table)
