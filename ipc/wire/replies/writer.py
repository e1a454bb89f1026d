"""The writer's replies, one class per op's answer (``mqstore.ipc.wire.requests.writer``).

    send           results: [SendResult map, ...]        (``SendResult.from_wire`` reads each)
    send_encoded   results (packed rows), status, reason, written_status
    encoding       store_host [ip, port], prop_crc, max_body_bytes
    ping           pid, written
    topics         topics {name: queue count}
    create_topic   topic, queues
    delete_topic   topic, existed, phys_offset

A send's answer goes out thousands of times a second: its two classes write their map directly.
An answer whose records are stored but whose wait failed goes out as ``stored_as(status)``: its
PUT_OK results say FLUSH_DISK_TIMEOUT (SYNC_FLUSH: not flushed in time; the record is in the log and
becomes visible once flushed), FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (SYNC_MASTER: not known to
be held by enough copies), as RocketMQ's SendResult says it; its refusals stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.engine.log.host import Host
from mqstore.engine.log.message import PutStatus
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.replies.base import Reply, ReplyError, field, mapping_of, maps

_PUT_OK = PutStatus.PUT_OK.value


@dataclass(frozen=True, slots=True)
class SendReply(Reply):
    """One result map per message of the send, in its order."""

    results: list[dict[str, Any]]

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "results": self.results}

    def stored_as(self, status: str) -> SendReply:
        return SendReply([{**r, "status": status} if r["status"] == _PUT_OK else r for r in self.results])

    @classmethod
    def decode(cls, message: dict[str, Any]) -> SendReply:
        return cls(maps(message, "results", "send result"))


@dataclass(frozen=True, slots=True)
class SendEncodedReply(Reply):
    """The rows of the records written (``mqstore.engine.batch.reply_rows``), which took
    ``written_status``; the records after them took ``status`` and ``reason``."""

    results: bytes
    status: str
    reason: str
    written_status: str = _PUT_OK

    def encode(self, request_id: Any) -> dict[str, Any]:
        return {"v": schema.VERSION, "id": request_id, "ok": True, "results": self.results, "status": self.status,
                "reason": self.reason, "written_status": self.written_status}

    def stored_as(self, status: str) -> SendEncodedReply:
        return SendEncodedReply(self.results, self.status, self.reason, status)

    @classmethod
    def decode(cls, message: dict[str, Any]) -> SendEncodedReply:
        get = message.get
        results, status, reason, written = get("results"), get("status"), get("reason"), get("written_status")
        if type(results) is bytes and type(status) is str and type(reason) is str and type(written) is str:
            return cls(results, status, reason, written)  # the hot path: each field looked at once
        return cls(field(message, "results", bytes), field(message, "status", str), field(message, "reason", str),
                   field(message, "written_status", str))


@dataclass(frozen=True, slots=True)
class EncodingReply(Reply):
    """How the writer wants records encoded (``mqstore.ipc.wire.encoded.Encoding``)."""

    store_host: Host
    prop_crc: bool
    max_body_bytes: int
    max_request_bytes: int = schema.MAX_FRAME_BYTES  # what the ingress takes in one request (a bigger one is dropped)

    def encode(self, request_id: Any) -> dict[str, Any]:
        reply = {"v": schema.VERSION, "id": request_id, "ok": True, "store_host": [self.store_host.ip,
                 self.store_host.port], "prop_crc": self.prop_crc, "max_body_bytes": self.max_body_bytes}
        if self.max_request_bytes != schema.MAX_FRAME_BYTES:  # absent: the default, as an older writer's
            reply["max_request_bytes"] = self.max_request_bytes
        return reply

    @classmethod
    def decode(cls, message: dict[str, Any]) -> EncodingReply:
        host = field(message, "store_host", list)
        if not (len(host) == 2 and type(host[0]) is str and type(host[1]) is int):
            raise ReplyError(f"reply: field 'store_host' must be [ip, port], got {host!r}"[:200])
        limit = message.get("max_request_bytes", schema.MAX_FRAME_BYTES)  # absent from an older writer's
        if type(limit) is not int or limit <= 0:
            raise ReplyError(f"reply: field 'max_request_bytes' must be a positive int, got {limit!r}"[:200])
        return cls(Host(host[0], host[1]), field(message, "prop_crc", bool), field(message, "max_body_bytes", int),
                   limit)


@dataclass(frozen=True, slots=True)
class WriterPingReply(Reply):
    pid: int
    written: int  # the commitlog's end

    @classmethod
    def decode(cls, message: dict[str, Any]) -> WriterPingReply:
        return cls(field(message, "pid", int), field(message, "written", int))


@dataclass(frozen=True, slots=True)
class TopicsReply(Reply):
    topics: dict[str, int]  # name -> queue count

    @classmethod
    def decode(cls, message: dict[str, Any]) -> TopicsReply:
        return cls(mapping_of(message, "topics", int))


@dataclass(frozen=True, slots=True)
class CreateTopicReply(Reply):
    topic: str
    queues: int  # its queue count now

    @classmethod
    def decode(cls, message: dict[str, Any]) -> CreateTopicReply:
        return cls(field(message, "topic", str), field(message, "queues", int))


@dataclass(frozen=True, slots=True)
class DeleteTopicReply(Reply):
    topic: str
    existed: bool
    phys_offset: int  # the commitlog's end when it was deleted

    @classmethod
    def decode(cls, message: dict[str, Any]) -> DeleteTopicReply:
        return cls(field(message, "topic", str), field(message, "existed", bool), field(message, "phys_offset", int))
