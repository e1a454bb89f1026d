"""The readers' ack-mode replies (``mqstore.ipc.wire.requests.acks``) and ``ack_stats``.

    ack_pull      msgs: [delivery map, ...]    (``Delivery.from_ack_wire`` reads each; [] when none)
    ack, nack     results: [status, ...]       one per receipt, in its order (``AckStatus``)
    ack_release   released                     deliveries due again at once
    ack_stats     queues: [{group, topic, queue, ready, unacked, redelivered, dead}, ...]

An ack-mode queue's stats name the queue ``queue`` on the wire and ``queue_id`` here, as every
other result of the project does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.replies.base import Reply, ReplyError, field, maps, strings


@dataclass(frozen=True, slots=True)
class AckPullReply(Reply):
    msgs: list[dict[str, Any]]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "msgs": self.msgs}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> AckPullReply:
        return cls(maps(message, "msgs", "delivery"))


@dataclass(frozen=True, slots=True)
class SettleReply(Reply):
    """An ``ack``'s or a ``nack``'s statuses, one per receipt."""

    results: list[str]

    @classmethod
    def decode(cls, message: dict[str, Any]) -> SettleReply:
        return cls(strings(message, "results"))


@dataclass(frozen=True, slots=True)
class ReleaseReply(Reply):
    released: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> ReleaseReply:
        return cls(field(message, "released", int))


@dataclass(frozen=True, slots=True)
class AckQueueStats:
    """One ack-mode queue a reader has open: ready (due, and what waits past the index), unacked (in
    consumers' hands), redelivered (handed out again since it opened), dead (waiting for ``%DLQ%``)."""

    group: str
    topic: str
    queue_id: int
    ready: int
    unacked: int
    redelivered: int
    dead: int

    def wire(self) -> dict[str, Any]:
        return {"group": self.group, "topic": self.topic, "queue": self.queue_id, "ready": self.ready,
                "unacked": self.unacked, "redelivered": self.redelivered, "dead": self.dead}

    @classmethod
    def decode(cls, raw: Any) -> AckQueueStats:
        if type(raw) is not dict:
            raise ReplyError(f"reply: each of 'queues' must be a map, got {type(raw).__name__}")
        return cls(field(raw, "group", str), field(raw, "topic", str), field(raw, "queue", int),
                   *(field(raw, name, int) for name in ("ready", "unacked", "redelivered", "dead")))


@dataclass(frozen=True, slots=True)
class AckStatsReply(Reply):
    queues: tuple[AckQueueStats, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "queues": [q.wire() for q in self.queues]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> AckStatsReply:
        return cls(tuple(map(AckQueueStats.decode, field(message, "queues", list))))
