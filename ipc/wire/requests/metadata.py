"""The readers' metadata ops, which a master's remoting front and a slave's ``metasync`` actor send
(``mqstore.actors.reader.offsets`` and ``mqstore.actors.reader.ack_groups`` answer them):

    offset_table    no fields                 (reader 0) every committed offset, and the table's counter;
                                              deleted: [[group, deletion number], ...]
    merge_offsets   entries [[topic, group, queue, offset], ...], deleted? [[group, number], ...]
                                              (reader 0) a master's offsets taken in: each moves forward
                                              only, and no further than the queue's end here; first, the
                                              groups deleted there since (``mqstore.engine.meta.deleted_groups``)
                                              lose their offsets here
    ack_marks       no fields                 (every reader) how far each ack-mode group it owns acked
    merge_ack_marks marks [[group, topic, queue, acked_below], ...]
                                              (each reader, the marks of the queues it owns) a master's
                                              ack marks taken in: each queue acked below its mark, forward
                                              only, and no further than the queue's end here
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from mqstore.ipc.wire import schema
from mqstore.ipc.wire.requests.base import INT_MAX, LONG_MAX, MAX_NAME_CHARS, Op, Request

MAX_MERGED_OFFSETS = 1 << 20  # entries in one merge_offsets

OffsetEntry = tuple[str, str, int, int]  # topic, group, queue id, next queue offset
AckMark = tuple[str, str, int, int]  # group, topic, queue id, acked_below (every queue offset below it acked)
GroupDeletion = tuple[str, int]  # group, the number of its deletion (``mqstore.engine.meta.deleted_groups``)


@dataclass(frozen=True, slots=True)
class OffsetTable(Request):
    OP: ClassVar[Op] = Op.OFFSET_TABLE


@dataclass(frozen=True, slots=True)
class AckMarks(Request):
    OP: ClassVar[Op] = Op.ACK_MARKS


@dataclass(frozen=True, slots=True)
class MergeOffsets(Request):
    OP: ClassVar[Op] = Op.MERGE_OFFSETS
    entries: tuple[OffsetEntry, ...]
    deleted: tuple[GroupDeletion, ...] = ()

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "op": self.OP.value, "id": request_id,
                "entries": [list(entry) for entry in self.entries],
                "deleted": [list(deletion) for deletion in self.deleted]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> MergeOffsets:
        raw: list[Any] = schema.field(message, "entries", list)
        if len(raw) > MAX_MERGED_OFFSETS:
            raise schema.SchemaError(f"field 'entries' holds more than {MAX_MERGED_OFFSETS} offsets")
        deleted: list[Any] = schema.field(message, "deleted", list) if "deleted" in message else []
        if len(deleted) > MAX_MERGED_OFFSETS:
            raise schema.SchemaError(f"field 'deleted' holds more than {MAX_MERGED_OFFSETS} groups")
        return cls(tuple(offset_entry(item) for item in raw), tuple(group_deletion(item) for item in deleted))


def group_deletion(item: Any) -> GroupDeletion:
    """One ``[group, deletion number]``; ``schema.SchemaError`` for anything else."""
    if type(item) is not list or len(item) != 2:
        raise schema.SchemaError(f"a group deletion must be [group, number], got {item!r}"[:200])
    group, number = item
    if type(group) is not str or not group or len(group) > MAX_NAME_CHARS:
        raise schema.SchemaError(f"a group deletion's group must be a name, got {item!r}"[:200])
    if type(number) is not int or not 1 <= number <= LONG_MAX:
        raise schema.SchemaError(f"a group deletion's number is out of range: {item!r}"[:200])
    return group, number


def offset_entry(item: Any) -> OffsetEntry:
    """One ``[topic, group, queue, offset]``; ``schema.SchemaError`` for anything else."""
    if type(item) is not list or len(item) != 4:
        raise schema.SchemaError(f"an offset entry must be [topic, group, queue, offset], got {item!r}"[:200])
    topic, group, queue_id, queue_offset = item
    if type(topic) is not str or type(group) is not str or len(topic) > MAX_NAME_CHARS or len(group) > MAX_NAME_CHARS:
        raise schema.SchemaError(f"an offset entry's topic and group must be names, got {item!r}"[:200])
    if type(queue_id) is not int or not 0 <= queue_id <= INT_MAX:
        raise schema.SchemaError(f"an offset entry's queue is out of range: {item!r}"[:200])
    if type(queue_offset) is not int or not 0 <= queue_offset <= LONG_MAX:
        raise schema.SchemaError(f"an offset entry's offset is out of range: {item!r}"[:200])
    return topic, group, queue_id, queue_offset


@dataclass(frozen=True, slots=True)
class MergeAckMarks(Request):
    OP: ClassVar[Op] = Op.MERGE_ACK_MARKS
    marks: tuple[AckMark, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "op": self.OP.value, "id": request_id, "marks": [list(m) for m in self.marks]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> MergeAckMarks:
        raw: list[Any] = schema.field(message, "marks", list)
        if len(raw) > MAX_MERGED_OFFSETS:
            raise schema.SchemaError(f"field 'marks' holds more than {MAX_MERGED_OFFSETS} marks")
        return cls(tuple(ack_mark(item) for item in raw))


def ack_mark(item: Any) -> AckMark:
    """One ``[group, topic, queue, acked_below]``; ``schema.SchemaError`` for anything else."""
    if type(item) is not list or len(item) != 4:
        raise schema.SchemaError(f"an ack mark must be [group, topic, queue, acked_below], got {item!r}"[:200])
    topic, group, queue_id, acked_below = offset_entry([item[1], item[0], item[2], item[3]])
    return group, topic, queue_id, acked_below
