"""The replies to the readers' purge ops (``mqstore.ipc.wire.requests.purge``).

    purge_queues     floors [[queue, floor], ...], purged [[group, queue, mode, purged, kept], ...]
                     mode "offset" (a committed consumer offset moved to the floor: ``purged``
                     messages skipped) or "ack" (an ack-mode queue: ``purged`` ready messages
                     acked, ``kept`` unacked ones left with their consumers)
    persist_offsets  persisted (whether the table had changes to write)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.replies.base import Reply, ReplyError, field
from mqstore.ipc.wire.requests.purge import Floor, floor

OFFSET_MODE = "offset"
ACK_MODE = "ack"


@dataclass(frozen=True, slots=True)
class PurgedQueue:
    """What a purge did to one group's position on one queue."""

    group: str
    queue_id: int
    mode: str        # OFFSET_MODE or ACK_MODE
    purged: int      # messages the group will not get
    kept: int = 0    # ack mode: unacked messages left with the consumers holding them


@dataclass(frozen=True, slots=True)
class PurgeQueuesReply(Reply):
    floors: tuple[Floor, ...]
    purged: tuple[PurgedQueue, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "floors": [list(f) for f in self.floors],
                "purged": [[p.group, p.queue_id, p.mode, p.purged, p.kept] for p in self.purged]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PurgeQueuesReply:
        try:
            floors = tuple(floor(item) for item in field(message, "floors", list))
        except schema.SchemaError as exc:
            raise ReplyError(f"reply: field 'floors': {exc}") from None
        return cls(floors, tuple(_purged(item) for item in field(message, "purged", list)))


def _purged(item: Any) -> PurgedQueue:
    if (type(item) is not list or len(item) != 5 or type(item[0]) is not str or item[2] not in (OFFSET_MODE, ACK_MODE)
            or not all(type(v) is int for v in (item[1], item[3], item[4]))):
        raise ReplyError(f"reply: a purged queue must be [group, queue, mode, purged, kept], got {item!r}"[:200])
    return PurgedQueue(item[0], item[1], item[2], item[3], item[4])


@dataclass(frozen=True, slots=True)
class PersistOffsetsReply(Reply):
    persisted: bool

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PersistOffsetsReply:
        return cls(field(message, "persisted", bool))
