"""The readers' replies (``mqstore.ipc.wire.requests.reader``), one class per reply shape.

    pull             status, next, min, max, msgs [map, ...], replied_us (with trace)     ``PullReply``
    pull (raw)       status, next, min, max, count, cols, replied_us; the records' part   ``PackedPullReply``
    query_key, query_uniq, view_id
                     msgs [map, ...], index_ms, index_phys (the index's marks; not for view_id)
                                                                                          ``MessagesReply``
    (raw), query_keys
                     count, cols, counts (query_keys), index_ms, index_phys; the part     ``PackedRecordsReply``
    offset_by_time, fetch_offset, commit_offset   offset                                  ``OffsetReply``
    queue_info       queues {"queue id": [min, max]}                                      ``QueueInfoReply``
    groups           groups {group: [topic, ...]}                                         ``GroupsReply``
    group_describe   group, queues [queue lag map, ...] (``mqstore.ipc.wire.group_lag``)  ``GroupDescribeReply``
    delete_topic_offsets   deleted                                                        ``DeleteTopicOffsetsReply``
    group_activity   groups {group: last seen ms}, now_ms                                 ``GroupActivityReply``
    ping             pid, index, readers, readable_end, parked                            ``ReaderPingReply``
    topic_stats      queues {"queue id": [min, max, bytes]}                               ``TopicStatsReply``
    delete_group     offsets (topics whose offsets went), ack_queues [[topic, queue], ...] ``DeleteGroupReply``
    ack_group_stats  as ack_stats (``mqstore.ipc.wire.replies.acks.AckStatsReply``)
    pull_queues      queues [[queue, status, next, min, max, count], ...], count, cols, replied_us (with
                     trace); the part: every queue's records, one queue after another     ``PullQueuesReply``

A packed reply's records travel as the one part after the map (``mqstore.ipc.wire.messages.stored_parts``):
its ``encode`` puts them in the map's ``parts``, which the reader hands to ``schema.pack_message`` as
frames, and its ``decode`` reads them from the ``parts`` a transport gave back (a memoryview of ZeroMQ's
buffer, never copied). The index's marks are there only when the store has an index. A pull's answer
goes out a thousand times a second per queue: its two classes write their map directly and read it
with each field looked at once, and they are named tuples (immutable and typed as the frozen classes,
built in ~0.25 µs where a frozen dataclass of eight fields takes ~1 µs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from mqstore.engine.read.group_lag import QueueLag
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.group_lag import lag_to_wire, lags_from_wire
from mqstore.ipc.wire.messages import MessageBatch, stored_records
from mqstore.ipc.wire.replies.base import Reply, ReplyError, field, mapping_of, maps

_VERSION = schema.VERSION


def _msgs(message: dict[str, Any]) -> list[dict[str, Any]]:
    return maps(message, "msgs", "message")


def _packed(message: dict[str, Any]) -> tuple[int, bytes, bytes | memoryview]:
    """A packed reply's count, column block and records (``stored_records``' checks)."""
    records, cols, count = stored_records(message)
    return count, cols, records


def _optional_int(message: dict[str, Any], name: str) -> int | None:
    return field(message, name, int) if name in message else None


class _PullFields(NamedTuple):
    status: str  # ``mqstore.engine.read.lookup.GetStatus``'s value
    next_queue_offset: int
    min_queue_offset: int
    max_queue_offset: int
    msgs: list[dict[str, Any]]
    replied_us: int | None = None  # with trace: the reader's wall clock as it answered


class PullReply(_PullFields, Reply):
    """A pull's messages as maps (``ReceivedMessage.from_wire`` reads each): the remoting front's
    and a client's that did not ask for them packed."""

    __slots__ = ()

    def encode(self, request_id: Any) -> dict[str, Any]:
        message = {"v": _VERSION, "id": request_id, "ok": True, "status": self.status, "next": self.next_queue_offset,
                   "min": self.min_queue_offset, "max": self.max_queue_offset, "msgs": self.msgs}
        if self.replied_us is not None:
            message["replied_us"] = self.replied_us
        return message

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PullReply:
        return cls(field(message, "status", str), field(message, "next", int), field(message, "min", int),
                   field(message, "max", int), _msgs(message), _optional_int(message, "replied_us"))


class _PackedPullFields(NamedTuple):
    status: str
    next_queue_offset: int
    min_queue_offset: int
    max_queue_offset: int
    record_count: int  # ``count`` on the wire
    cols: bytes
    records: bytes | memoryview
    replied_us: int | None = None


class PackedPullReply(_PackedPullFields, Reply):
    """A pull's records as stored, back to back (``records``), with their count and column block
    (``mqstore.ipc.wire.messages.pack_columns``): ``batch()`` reads them as messages."""

    __slots__ = ()

    def encode(self, request_id: Any) -> dict[str, Any]:
        message = {"v": _VERSION, "id": request_id, "ok": True, "status": self.status, "next": self.next_queue_offset,
                   "min": self.min_queue_offset, "max": self.max_queue_offset, "count": self.record_count,
                   "cols": self.cols}
        if self.replied_us is not None:
            message["replied_us"] = self.replied_us
        message["parts"] = [self.records]
        return message

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PackedPullReply:
        get = message.get
        status, next_offset, lo, hi, replied = get("status"), get("next"), get("min"), get("max"), get("replied_us")
        if not (type(status) is str and type(next_offset) is int and type(lo) is int and type(hi) is int
                and (replied is None or type(replied) is int)):
            status, next_offset = field(message, "status", str), field(message, "next", int)
            lo, hi = field(message, "min", int), field(message, "max", int)
            replied = _optional_int(message, "replied_us")
        records, cols, count = stored_records(message)
        return cls(status, next_offset, lo, hi, count, cols, records, replied)

    def batch(self) -> MessageBatch:
        """The records as messages, decoded when touched; ``ReplyError`` when the columns disagree."""
        return MessageBatch.from_packed(self.records, self.cols, self.record_count)


@dataclass(frozen=True, slots=True)
class MessagesReply(Reply):
    """Messages as maps: a key's or a unique key's query (with the index's marks), a ``view_id``'s
    ([] or [one], no marks)."""

    OMITTED: ClassVar[frozenset[str]] = frozenset({"index_ms", "index_phys"})
    msgs: list[dict[str, Any]]
    index_ms: int | None = None    # RocketMQ's indexLastUpdateTimestamp
    index_phys: int | None = None  # and indexLastUpdatePhyoffset

    @classmethod
    def decode(cls, message: dict[str, Any]) -> MessagesReply:
        return cls(_msgs(message), _optional_int(message, "index_ms"), _optional_int(message, "index_phys"))


@dataclass(frozen=True, slots=True)
class PackedRecordsReply(Reply):
    """Records as stored, packed as a pull's: a query's (``counts``: how many each key has, in the
    keys' order, for ``query_keys``) or a ``view_id``'s."""

    record_count: int  # ``count`` on the wire
    cols: bytes
    records: bytes | memoryview
    counts: list[int] | None = None
    index_ms: int | None = None
    index_phys: int | None = None

    def encode(self, request_id: Any) -> dict[str, Any]:
        message: dict[str, Any] = {"v": _VERSION, "id": request_id, "ok": True, "count": self.record_count,
                                   "cols": self.cols}
        for name in ("counts", "index_ms", "index_phys"):
            value = getattr(self, name)
            if value is not None:
                message[name] = value
        message["parts"] = [self.records]
        return message

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PackedRecordsReply:
        counts = message.get("counts")
        if counts is not None and not (type(counts) is list and all(type(c) is int and c >= 0 for c in counts)):
            raise ReplyError(f"reply: field 'counts' must be a list of counts, got {counts!r}"[:200])
        return cls(*_packed(message), counts, _optional_int(message, "index_ms"), _optional_int(message, "index_phys"))

    def batch(self) -> MessageBatch:
        return MessageBatch.from_packed(self.records, self.cols, self.record_count)


@dataclass(frozen=True, slots=True)
class OffsetReply(Reply):
    """A queue offset: ``offset_by_time``'s, ``fetch_offset``'s (-1: the group never committed), the
    one ``commit_offset`` committed."""

    offset: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> OffsetReply:
        return cls(field(message, "offset", int))


@dataclass(frozen=True, slots=True)
class QueueInfoReply(Reply):
    """Queue id -> (min, max) queue offset as published; the wire's map keys are strings."""

    queues: dict[int, tuple[int, int]]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": _VERSION, "id": request_id, "ok": True,
                "queues": {str(q): [lo, hi] for q, (lo, hi) in self.queues.items()}}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> QueueInfoReply:
        queues: dict[int, tuple[int, int]] = {}
        for key, span in mapping_of(message, "queues", list).items():
            if not (key.isdigit() and len(span) == 2 and all(type(o) is int for o in span)):
                raise ReplyError(f"reply: field 'queues' must map queue ids to [min, max], got {key!r}: {span!r}"[:200])
            queues[int(key)] = (span[0], span[1])
        return cls(queues)


@dataclass(frozen=True, slots=True)
class GroupsReply(Reply):
    groups: dict[str, list[str]]  # group -> the topics it committed offsets on

    @classmethod
    def decode(cls, message: dict[str, Any]) -> GroupsReply:
        groups = mapping_of(message, "groups", list)
        for topics in groups.values():
            if not all(type(t) is str for t in topics):
                raise ReplyError("reply: field 'groups' must map groups to lists of topics")
        return cls(groups)


@dataclass(frozen=True, slots=True)
class GroupDescribeReply(Reply):
    group: str
    queues: tuple[QueueLag, ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": _VERSION, "id": request_id, "ok": True, "group": self.group,
                "queues": [lag_to_wire(q) for q in self.queues]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> GroupDescribeReply:
        try:
            queues = tuple(lags_from_wire(message.get("queues")))
        except ReplyError as exc:
            raise ReplyError(f"reply: field 'queues': {exc}") from None
        return cls(field(message, "group", str), queues)


@dataclass(frozen=True, slots=True)
class DeleteTopicOffsetsReply(Reply):
    deleted: bool  # whether any group had offsets on the topic

    @classmethod
    def decode(cls, message: dict[str, Any]) -> DeleteTopicOffsetsReply:
        return cls(field(message, "deleted", bool))


@dataclass(frozen=True, slots=True)
class GroupActivityReply(Reply):
    groups: dict[str, int]  # group -> the last time (wall ms) this reader served one of its consumers
    now_ms: int

    @classmethod
    def decode(cls, message: dict[str, Any]) -> GroupActivityReply:
        return cls(mapping_of(message, "groups", int), field(message, "now_ms", int))


@dataclass(frozen=True, slots=True)
class ReaderPingReply(Reply):
    pid: int
    index: int          # which reader answered
    readers: int        # how many the broker runs
    readable_end: int   # the commitlog's end as far as the consume queues are published
    parked: int         # pulls waiting (long polls and ack-mode pulls)

    @classmethod
    def decode(cls, message: dict[str, Any]) -> ReaderPingReply:
        return cls(*(field(message, name, int) for name in ("pid", "index", "readers", "readable_end", "parked")))


__all__ = ["DeleteTopicOffsetsReply", "GroupActivityReply", "GroupDescribeReply", "GroupsReply", "MessagesReply",
           "OffsetReply", "PackedPullReply", "PackedRecordsReply", "PullQueuesReply", "PullReply",
           "PulledQueue", "QueueInfoReply", "ReaderPingReply"]


@dataclass(frozen=True, slots=True)
class TopicStatsReply(Reply):
    """Queue id -> (min, max, bytes): the published span and the bytes of its messages' records (each
    consume-queue entry's size, summed); the wire's map keys are strings."""

    queues: dict[int, tuple[int, int, int]]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": _VERSION, "id": request_id, "ok": True,
                "queues": {str(q): list(span) for q, span in self.queues.items()}}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> TopicStatsReply:
        queues: dict[int, tuple[int, int, int]] = {}
        for key, span in mapping_of(message, "queues", list).items():
            if not (key.isdigit() and len(span) == 3 and all(type(o) is int for o in span)):
                raise ReplyError(f"reply: field 'queues' must map queue ids to [min, max, bytes], got {key!r}: "
                                 f"{span!r}"[:200])
            queues[int(key)] = (span[0], span[1], span[2])
        return cls(queues)


@dataclass(frozen=True, slots=True)
class DeleteGroupReply(Reply):
    """What one reader removed of a group: the topics whose committed offsets went (reader 0's table;
    [] elsewhere) and the ack-mode queues whose index went (those it owns)."""

    offsets: tuple[str, ...]
    ack_queues: tuple[tuple[str, int], ...]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": _VERSION, "id": request_id, "ok": True, "offsets": list(self.offsets),
                "ack_queues": [[topic, queue_id] for topic, queue_id in self.ack_queues]}

    @classmethod
    def decode(cls, message: dict[str, Any]) -> DeleteGroupReply:
        offsets = field(message, "offsets", list)
        queues = field(message, "ack_queues", list)
        if not all(type(t) is str for t in offsets):
            raise ReplyError("reply: field 'offsets' must hold topics")
        if not all(type(q) is list and len(q) == 2 and type(q[0]) is str and type(q[1]) is int for q in queues):
            raise ReplyError("reply: field 'ack_queues' must hold [topic, queue] pairs")
        return cls(tuple(offsets), tuple((q[0], q[1]) for q in queues))


class PulledQueue(NamedTuple):
    """One queue's part of a ``pull_queues`` answer: as a pull's reply would say it, and how many of
    the reply's records are its (they follow those of the queues listed before it)."""

    queue_id: int
    status: str
    next_queue_offset: int
    min_queue_offset: int
    max_queue_offset: int
    record_count: int


class _PullQueuesFields(NamedTuple):
    queues: list[PulledQueue]  # those with something to say (every queue's, when none has a message)
    record_count: int
    cols: bytes
    records: bytes | memoryview
    replied_us: int | None = None


class PullQueuesReply(_PullQueuesFields, Reply):
    """A ``pull_queues`` answer: each queue's status and its records, packed as a pull's, one queue
    after another; ``batches()`` cuts them apart."""

    __slots__ = ()

    def encode(self, request_id: Any) -> dict[str, Any]:
        message = {"v": _VERSION, "id": request_id, "ok": True, "queues": [list(q) for q in self.queues],
                   "count": self.record_count, "cols": self.cols}
        if self.replied_us is not None:
            message["replied_us"] = self.replied_us
        message["parts"] = [self.records]
        return message

    @classmethod
    def decode(cls, message: dict[str, Any]) -> PullQueuesReply:
        rows = field(message, "queues", list)
        if not all(type(r) is list and len(r) == 6 and type(r[1]) is str
                   and all(type(v) is int for i, v in enumerate(r) if i != 1) and r[5] >= 0 for r in rows):
            raise ReplyError("reply: field 'queues' must hold [queue, status, next, min, max, count] rows")
        records, cols, count = stored_records(message)
        if sum(r[5] for r in rows) != count:
            raise ReplyError(f"reply: the queues' counts do not add up to the {count} records")
        return cls([PulledQueue(*r) for r in rows], count, cols, records, _optional_int(message, "replied_us"))

    def batches(self) -> list[tuple[PulledQueue, MessageBatch]]:
        """Each queue's part and its records as messages; ``ReplyError`` when the columns disagree."""
        whole = MessageBatch.from_packed(self.records, self.cols, self.record_count)
        out, first = [], 0
        for pulled in self.queues:
            out.append((pulled, whole[first:first + pulled.record_count]))
            first += pulled.record_count
        return out
