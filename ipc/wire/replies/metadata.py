"""The answers to the readers' metadata ops (``mqstore.ipc.wire.requests.metadata``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.messages import ReplyError
from mqstore.ipc.wire.replies.base import Reply, field
from mqstore.ipc.wire.requests.metadata import (
    AckMark,
    GroupDeletion,
    OffsetEntry,
    ack_mark,
    group_deletion,
    offset_entry,
)


def _entries(message: dict[str, Any], name: str) -> tuple[OffsetEntry, ...]:
    raw: list[Any] = field(message, name, list)
    try:
        return tuple(offset_entry(item) for item in raw)
    except schema.SchemaError as exc:
        raise ReplyError(f"reply: field {name!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class OffsetTableReply(Reply):
    """Every committed offset as ``[topic, group, queue, offset]``, the table's data version counter,
    and the groups deleted with their deletion numbers."""

    entries: tuple[OffsetEntry, ...]
    counter: int
    deleted: tuple[GroupDeletion, ...] = ()

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "entries": [list(e) for e in self.entries],
                "counter": self.counter, "deleted": [list(d) for d in self.deleted]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> OffsetTableReply:
        raw: list[Any] = field(message, "deleted", list) if "deleted" in message else []
        try:
            deleted = tuple(group_deletion(item) for item in raw)
        except schema.SchemaError as exc:
            raise ReplyError(f"reply: field 'deleted': {exc}") from None
        return cls(_entries(message, "entries"), field(message, "counter", int), deleted)


@dataclass(frozen=True, slots=True)
class MergeOffsetsReply(Reply):
    """How many offsets moved forward, and those held back at this broker's queue end, as
    ``[topic, group, queue, the end they stopped at]``."""

    moved: int
    clamped: tuple[OffsetEntry, ...]
    groups_deleted: int = 0  # groups whose offsets went here, deleted on the master since the last merge

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "moved": self.moved,
                "clamped": [list(e) for e in self.clamped], "groups_deleted": self.groups_deleted}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> MergeOffsetsReply:
        deleted = field(message, "groups_deleted", int) if "groups_deleted" in message else 0
        return cls(field(message, "moved", int), _entries(message, "clamped"), deleted)


@dataclass(frozen=True, slots=True)
class AckMarksReply(Reply):
    """Each ack-mode queue a reader owns: ``[group, topic, queue, acked_below]``."""

    marks: tuple[AckMark, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "marks": [list(m) for m in self.marks]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> AckMarksReply:
        return cls(_marks(message, "marks"))


def _marks(message: dict[str, Any], name: str) -> tuple[AckMark, ...]:
    raw: list[Any] = field(message, name, list)
    try:
        return tuple(ack_mark(item) for item in raw)
    except schema.SchemaError as exc:
        raise ReplyError(f"reply: field {name!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class MergeAckMarksReply(Reply):
    """How many queues moved forward and how many messages that acked, and the marks held back at
    this broker's queue end, as ``[group, topic, queue, the end they stopped at]``."""

    moved: int
    acked: int
    clamped: tuple[AckMark, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "moved": self.moved, "acked": self.acked,
                "clamped": [list(m) for m in self.clamped]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> MergeAckMarksReply:
        return cls(field(message, "moved", int), field(message, "acked", int), _marks(message, "clamped"))
