"""The answers to the readers' metadata ops (``mqstore.ipc.wire.requests.metadata``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.messages import ReplyError
from mqstore.ipc.wire.replies.base import Reply, field
from mqstore.ipc.wire.requests.metadata import OffsetEntry, offset_entry

AckMark = tuple[str, str, int, int]  # group, topic, queue id, acked_below (every queue offset below it acked)


def _entries(message: dict[str, Any], name: str) -> tuple[OffsetEntry, ...]:
    raw: list[Any] = field(message, name, list)
    try:
        return tuple(offset_entry(item) for item in raw)
    except schema.SchemaError as exc:
        raise ReplyError(f"reply: field {name!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class OffsetTableReply(Reply):
    """Every committed offset as ``[topic, group, queue, offset]``, and the table's data version counter."""

    entries: tuple[OffsetEntry, ...]
    counter: int

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "entries": [list(e) for e in self.entries],
                "counter": self.counter}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> OffsetTableReply:
        return cls(_entries(message, "entries"), field(message, "counter", int))


@dataclass(frozen=True, slots=True)
class MergeOffsetsReply(Reply):
    """How many offsets moved forward, and those held back at this broker's queue end, as
    ``[topic, group, queue, the end they stopped at]``."""

    moved: int
    clamped: tuple[OffsetEntry, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "moved": self.moved,
                "clamped": [list(e) for e in self.clamped]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> MergeOffsetsReply:
        return cls(field(message, "moved", int), _entries(message, "clamped"))


@dataclass(frozen=True, slots=True)
class AckMarksReply(Reply):
    """Each ack-mode queue a reader owns: ``[group, topic, queue, acked_below]``."""

    marks: tuple[AckMark, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "marks": [list(m) for m in self.marks]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> AckMarksReply:
        raw: list[Any] = field(message, "marks", list)
        marks = []
        for item in raw:
            if type(item) is not list or len(item) != 4:
                raise ReplyError(f"reply: an ack mark must be [group, topic, queue, acked_below], got {item!r}"[:200])
            try:
                topic, group, queue_id, acked_below = offset_entry([item[1], item[0], item[2], item[3]])
            except schema.SchemaError as exc:
                raise ReplyError(f"reply: field 'marks': {exc}") from None
            marks.append((group, topic, queue_id, acked_below))
        return cls(tuple(marks))
