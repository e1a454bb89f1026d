"""The readers' purge ops (``mqstore.actors.reader.purge`` answers them):

    purge_queues     topic, queues? [queue id, ...] (None: every queue), floors? [[queue, floor], ...]
                     reader 0 without ``floors``: each queue's end becomes its floor, every group's
                     committed offset below it moves there, durably, and its own ack-mode queues
                     lose their ready messages; every other reader, with reader 0's ``floors``:
                     its ack-mode queues lose their ready messages, its pulls start at the floors
    persist_offsets  no fields   (reader 0) the consumer offsets written to disk (fsynced) now
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests.base import INT_MAX, LONG_MAX, Op, Request, topic

MAX_PURGED_QUEUES = 1 << 16  # queue ids (or floors) in one purge_queues

Floor = tuple[int, int]  # queue id, the queue offset its pulls start at from now on


@dataclass(frozen=True, slots=True)
class PurgeQueues(Request):
    OP: ClassVar[Op] = Op.PURGE_QUEUES
    topic: str
    queues: tuple[int, ...] | None = None
    floors: tuple[Floor, ...] | None = None

    def encode(self, request_id: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"v": schema.VERSION, "op": self.OP.value, "id": request_id, "topic": self.topic}
        if self.queues is not None:
            message["queues"] = list(self.queues)
        if self.floors is not None:
            message["floors"] = [list(f) for f in self.floors]
        return message

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PurgeQueues:
        queues: list[Any] | None = schema.field(message, "queues", list, default=None)
        floors: list[Any] | None = schema.field(message, "floors", list, default=None)
        if len(queues or ()) > MAX_PURGED_QUEUES or len(floors or ()) > MAX_PURGED_QUEUES:
            raise schema.SchemaError(f"a purge names at most {MAX_PURGED_QUEUES} queues")
        if queues is not None and not all(type(q) is int and 0 <= q <= INT_MAX for q in queues):
            raise schema.SchemaError("field 'queues' must hold queue ids")
        return cls(topic(message), None if queues is None else tuple(queues),
                   None if floors is None else tuple(floor(item) for item in floors))


def floor(item: Any) -> Floor:
    """One ``[queue, floor]``; ``schema.SchemaError`` for anything else."""
    if (type(item) is not list or len(item) != 2 or not all(type(v) is int for v in item)
            or not 0 <= item[0] <= INT_MAX or not 0 <= item[1] <= LONG_MAX):
        raise schema.SchemaError(f"a floor must be [queue, offset], got {item!r}"[:200])
    return item[0], item[1]


@dataclass(frozen=True, slots=True)
class PersistOffsets(Request):
    OP: ClassVar[Op] = Op.PERSIST_OFFSETS
