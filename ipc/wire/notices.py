"""Notices: what one actor tells the others over PUB/SUB, one typed value per topic.

A notice is two frames: its topic (``schema``'s ``TICK``, ``WRITTEN``, ...) and one msgpack map
(``schema.pack``) that carries ``v`` (``schema.VERSION``) and the fields below, in this order. A
notice's ``encode()`` gives the map, ``frames()`` both frames; ``decode(frame)`` takes the map and
raises ``schema.SchemaError`` for one that is not that notice (the subscriber logs it and goes on).
``dispatch`` alone is five frames: its topic, a small map (``schema.pack_message``, announcing 3
parts), then the batch's columns, key text and key bounds as raw frames, which ``decode(frame,
parts)`` reads in place, each length checked against the map's counts.
PUB/SUB may drop a notice; what one says can be read back from the files, so a lost one only delays
(``topic-deleted`` alone is not in the files: ``mqstore topics delete`` asks again until the queues
are gone).

| topic      | from -> to                                | map fields                                                 |
|------------|-------------------------------------------|------------------------------------------------------------|
| `tick`     | writer -> builders                        | `end`: every batch below it was published on `dispatch`    |
| `written`  | writer -> flush service                   | `end` (of the commitlog), `store_ms` (of its last record), |
|            |                                           | `sync` (a SYNC_FLUSH send waits: flush at once)            |
| `flushed`  | flush service -> writer                   | `end`: the commitlog is durable below it                   |
| `dispatch` | writer -> builders                        | `from`, `to` (the commitlog range), `topics`, `count`      |
|            |                                           | (records), `key_bytes`, `parts` (3); then three frames:    |
|            |                                           | ``DISPATCH_COLUMNS`` rows, the key text and its ``<i4``    |
|            |                                           | bounds (UNIQ_KEYs and KEYS, ``engine.batch.key_text``)     |
| `arrived`  | consume-queue builder -> readers, flusher | `queues` ([topic, queue id, next queue offset] triples),   |
|            |                                           | `applied` (commitlog offset), `store_ms`, `epoch`, `seq`   |
| `indexed`  | index builder -> flush service            | `files` (index file names written), `applied`, `store_ms`, |
|            |                                           | `epoch`, `seq`                                             |
| `topic-deleted` | writer -> builders                   | `topic`, `end` (the commitlog's end when it was deleted)   |
| `replicated` | a master's HA actor -> writer           | `end`: ``in_sync_replicas`` copies (the master's included, |
|            |                                           | slaves counted by broker id) hold the log below it;        |
|            |                                           | `in_sync` (slaves within ``max_gap_not_in_sync``),         |
|            |                                           | `connected` (slaves connected), `epoch` (the master's)     |

A builder's notices are numbered: ``epoch`` is drawn at random when its process starts and ``seq``
counts its notices from 0, so the flush service, which syncs only the files the notices name, sees a
notice lost (a gap in ``seq``) or a builder restarted (another ``epoch``: what its predecessor wrote
after its last notice was never named) and syncs every file of the family instead (``Chain``). A map
without them reads as epoch 0, seq 0: never a chain, so always a sweep.

Offsets and times are signed 64-bit values, as in the files. The dispatch batch is the engine's own
value (``mqstore.engine.batch.dispatch.DispatchBatch``): its frames carry its columns as they are, and the
topics an ``arrived`` notice names are checked with the engine's topic rule (readers open their files
by them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from mqstore.engine.batch.dispatch import DispatchBatch
from mqstore.engine.names import check_topic
from mqstore.ipc.wire import schema

LONG_MAX = (1 << 63) - 1


def _offset(message: dict[str, Any], name: str, default: Any = ...) -> int:
    value: int = schema.field(message, name, int, default=default, lo=0, hi=LONG_MAX)
    return value


def _strings(message: dict[str, Any], name: str) -> list[str]:
    values: list[Any] = schema.field(message, name, list)
    if not all(isinstance(v, str) for v in values):
        raise schema.SchemaError(f"field {name!r} must hold strings")
    return values


class Notice:
    """What every notice has: its topic, and its two frames from its ``encode``."""

    __slots__ = ()
    TOPIC: ClassVar[bytes]

    def encode(self) -> bytes:
        raise NotImplementedError

    def frames(self) -> list[bytes | memoryview]:
        return [self.TOPIC, self.encode()]


@dataclass(frozen=True, slots=True)
class _End(Notice):
    """A notice that says how far one thing reached in the commitlog, and nothing else."""

    end: int

    def encode(self) -> bytes:
        return schema.pack({"v": schema.VERSION, "end": self.end})

    @classmethod
    def decode(cls, frame: bytes | memoryview) -> Self:
        return cls(_offset(schema.unpack(frame), "end"))


class Tick(_End):
    """How far builders may apply: every dispatch batch below ``end`` was published."""

    __slots__ = ()
    TOPIC: ClassVar[bytes] = schema.TICK


@dataclass(frozen=True, slots=True)
class Written(Notice):
    """How far the commitlog goes; ``sync`` when a SYNC_FLUSH send waits for its flush."""

    TOPIC: ClassVar[bytes] = schema.WRITTEN
    end: int
    store_ms: int
    sync: bool

    def encode(self) -> bytes:
        return schema.pack({"v": schema.VERSION, "end": self.end, "store_ms": self.store_ms, "sync": self.sync})

    @classmethod
    def decode(cls, frame: bytes | memoryview) -> Written:
        message = schema.unpack(frame)
        return cls(_offset(message, "end"), _offset(message, "store_ms", 0),
                   schema.field(message, "sync", bool, default=False))


class Flushed(_End):
    """How far the commitlog is durable."""

    __slots__ = ()
    TOPIC: ClassVar[bytes] = schema.FLUSHED


@dataclass(frozen=True, slots=True)
class Replicated(Notice):
    """How far enough copies hold the commitlog, on a master with slaves (``mqstore.actors.ha``): a
    SYNC_MASTER send is answered SEND_OK once ``end`` covers it. Published on every change and on
    the HA actor's tick, so a writer that hears none for a while knows its slaves' state is unknown."""

    TOPIC: ClassVar[bytes] = schema.REPLICATED
    end: int
    in_sync: int    # slaves (distinct broker ids) within [ha] max_gap_not_in_sync of the master's end
    connected: int  # slaves connected and past their handshake
    epoch: int      # the master's epoch (mqstore.engine.ha)

    def encode(self) -> bytes:
        return schema.pack({"v": schema.VERSION, "end": self.end, "in_sync": self.in_sync,
                            "connected": self.connected, "epoch": self.epoch})

    @classmethod
    def decode(cls, frame: bytes | memoryview) -> Replicated:
        message = schema.unpack(frame)
        return cls(_offset(message, "end"), _offset(message, "in_sync"), _offset(message, "connected"),
                   _offset(message, "epoch"))


@dataclass(frozen=True, slots=True)
class Dispatch(Notice):
    """One append's DispatchRequests, as one batch of columns, and the commitlog range it covers
    (``from_phys`` to ``to_phys``): a small map and the batch's three buffers as they are, not one
    map per record nor the columns packed into the map."""

    TOPIC: ClassVar[bytes] = schema.DISPATCH
    from_phys: int
    to_phys: int
    batch: DispatchBatch

    def frames(self) -> list[bytes | memoryview]:
        batch = self.batch
        columns, text, bounds = batch.wire()
        return [self.TOPIC, *schema.pack_message(
            {"v": schema.VERSION, "from": self.from_phys, "to": self.to_phys, "topics": batch.topics,
             "count": len(batch), "key_bytes": len(text)}, (columns, text, bounds))]

    @classmethod
    def decode(cls, frame: bytes | memoryview, parts: Sequence[bytes | memoryview] = (), *,
               keys: bool = True) -> Dispatch:
        """The notice of the map ``frame`` and the frames after it, read in place (the batch's columns
        are views of ``parts``); without ``keys`` the batch has no key text (``DispatchBatch.from_wire``).

        A builder decodes one a round, so a map whose fields are all well formed is read with a few
        checks inline; any other goes the field-by-field way, which raises naming the field."""
        message = schema.unpack(frame)
        from_phys, to_phys = message.get("from"), message.get("to")
        count, key_bytes, topics = message.get("count"), message.get("key_bytes"), message.get("topics")
        announced = message.get("parts")
        if not (type(from_phys) is int and type(to_phys) is int and type(count) is int and type(key_bytes) is int
                and 0 <= from_phys <= LONG_MAX and 0 <= to_phys <= LONG_MAX and 0 <= count <= LONG_MAX
                and 0 <= key_bytes <= LONG_MAX and type(topics) is list and type(announced) is int
                and announced == 3 and len(parts) == 3
                and len(frame) + len(parts[0]) + len(parts[1]) + len(parts[2]) <= schema.MAX_FRAME_BYTES):
            return cls._decode_checked(frame, parts, keys=keys)
        try:
            batch = DispatchBatch.from_wire(count, key_bytes, topics, *parts, keys=keys)
        except (TypeError, ValueError) as exc:  # lengths, columns, key text and topics that disagree
            raise schema.SchemaError(f"not a dispatch batch: {exc}") from None
        return cls(from_phys, to_phys, batch)

    @classmethod
    def _decode_checked(cls, frame: bytes | memoryview, parts: Sequence[bytes | memoryview], *,
                        keys: bool) -> Dispatch:
        """``decode`` field by field: a SchemaError names the first field that is wrong."""
        message = schema.unpack_message(frame, parts)
        from_phys, to_phys = _offset(message, "from"), _offset(message, "to")
        count, key_bytes = _offset(message, "count"), _offset(message, "key_bytes")
        topics = schema.field(message, "topics", list)
        if len(parts) != 3:
            raise schema.SchemaError(f"a dispatch notice is a map and 3 frames, not {len(parts)}")
        try:
            batch = DispatchBatch.from_wire(count, key_bytes, topics, *parts, keys=keys)
        except (TypeError, ValueError) as exc:  # lengths, columns, key text and topics that disagree
            raise schema.SchemaError(f"not a dispatch batch: {exc}") from None
        return cls(from_phys, to_phys, batch)


@dataclass(frozen=True, slots=True)
class Arrived(Notice):
    """Queues that grew: each one's next queue offset, and how far the builder applied the commitlog."""

    TOPIC: ClassVar[bytes] = schema.ARRIVED
    queues: tuple[tuple[str, int, int], ...]
    applied: int
    store_ms: int
    epoch: int = 0  # the builder process's, drawn at its start
    seq: int = 0    # this notice's number among the builder process's notices

    def encode(self) -> bytes:
        # tuples pack as msgpack arrays, the same bytes lists give
        return schema.pack({"v": schema.VERSION, "queues": self.queues, "applied": self.applied,
                            "store_ms": self.store_ms, "epoch": self.epoch, "seq": self.seq})

    @classmethod
    def decode(cls, frame: bytes | memoryview) -> Arrived:
        message = schema.unpack(frame)
        applied = _offset(message, "applied")
        queues = schema.field(message, "queues", list)
        if not all(isinstance(q, list) and len(q) == 3 and isinstance(q[0], str) and isinstance(q[1], int)
                   and isinstance(q[2], int) for q in queues) \
                or not all(check_topic(topic) is None for topic in {q[0] for q in queues}):  # once a topic
            raise schema.SchemaError("queues must be [topic, queue id, max offset] triples")
        return cls(tuple(map(tuple, queues)), applied, _offset(message, "store_ms", 0), _offset(message, "epoch", 0),
                   _offset(message, "seq", 0))


@dataclass(frozen=True, slots=True)
class Indexed(Notice):
    """Index files written since the last notice, and how far the builder applied the commitlog."""

    TOPIC: ClassVar[bytes] = schema.INDEXED
    files: tuple[str, ...]
    applied: int
    store_ms: int
    epoch: int = 0
    seq: int = 0

    def encode(self) -> bytes:
        return schema.pack({"v": schema.VERSION, "files": self.files, "applied": self.applied,
                            "store_ms": self.store_ms, "epoch": self.epoch, "seq": self.seq})

    @classmethod
    def decode(cls, frame: bytes | memoryview) -> Indexed:
        message = schema.unpack(frame)
        return cls(tuple(_strings(message, "files")), _offset(message, "applied"), _offset(message, "store_ms", 0),
                   _offset(message, "epoch", 0), _offset(message, "seq", 0))


class Chain:
    """One family's numbered notices (``Arrived`` or ``Indexed``) as a subscriber receives them."""

    __slots__ = ("epoch", "seq")

    def __init__(self) -> None:
        self.epoch = self.seq = -1  # nothing received yet

    def follows(self, epoch: int, seq: int) -> bool:
        """Whether this notice comes right after the last one received from the same builder process:
        False for the first one, after a gap, from a builder restarted, or from one that numbers none."""
        continues = epoch != 0 and epoch == self.epoch and seq == self.seq + 1
        self.epoch, self.seq = epoch, seq
        return continues


@dataclass(frozen=True, slots=True)
class TopicDeleted(Notice):
    """A topic deleted: the consume-queue builder applies the commitlog up to ``end``, then removes the
    topic's queues."""

    TOPIC: ClassVar[bytes] = schema.TOPIC_DELETED
    topic: str
    end: int

    def encode(self) -> bytes:
        return schema.pack({"v": schema.VERSION, "topic": self.topic, "end": self.end})

    @classmethod
    def decode(cls, frame: bytes | memoryview) -> TopicDeleted:
        message = schema.unpack(frame)
        topic = schema.field(message, "topic", str)
        if check_topic(topic) is not None:
            raise schema.SchemaError(f"not a topic name: {topic!r}")
        return cls(topic, _offset(message, "end"))
