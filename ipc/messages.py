"""The values the client library hands to and gets from applications, and their wire maps.

Plain frozen dataclasses, so applications need nothing from the engine: a message to send
(``Outgoing``), the broker's answer to one send (``SendResult``), and a stored message as a reader
returns it (``ReceivedMessage``).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PUT_OK = "PUT_OK"
SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
COMPRESSED = 0x1  # sysFlag: the body is zlib-compressed


class ReplyError(ValueError):
    """A reply that does not have the shape this client expects (a broker of another version)."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to send. ``queue`` picks a queue; ``shard`` picks one by hash (ordered messages);
    with neither, the writer goes round robin."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    queue: int | None = None
    shard: str | None = None
    flag: int = 0
    born_ms: int | None = None
    born_host: tuple[str, int] | None = None
    reconsume_times: int = 0
    sys_flag: int = 0                   # 0x1: the body is compressed (zlib), as RocketMQ clients set it

    @classmethod
    def of(cls, value: Outgoing | Mapping[str, Any]) -> Outgoing:
        if isinstance(value, Outgoing):
            return value
        return cls(**value)

    def to_wire(self) -> dict[str, Any]:
        body = self.body.encode() if isinstance(self.body, str) else bytes(self.body)
        if isinstance(self.keys, str):
            raise TypeError("keys must be a sequence of strings, not one string")
        wire: dict[str, Any] = {"topic": self.topic, "body": body, "keys": list(self.keys),
                                "props": dict(self.properties), "flag": self.flag,
                                "reconsume_times": self.reconsume_times}
        optional = {"tags": self.tags, "queue": self.queue, "shard": self.shard, "born_ms": self.born_ms,
                    "sys_flag": self.sys_flag or None,
                    "born_host": list(self.born_host) if self.born_host is not None else None}
        wire.update({k: v for k, v in optional.items() if v is not None})
        return wire


@dataclass(frozen=True, slots=True)
class SendResult:
    status: str
    msg_id: str = ""
    queue: int = -1
    queue_offset: int = -1
    phys_offset: int = -1
    uniq_key: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == PUT_OK

    @classmethod
    def from_wire(cls, raw: Any) -> SendResult:
        if not isinstance(raw, dict) or not isinstance(raw.get("status"), str):
            raise ReplyError(f"a send result must be a map with a status, got {raw!r}")
        try:
            return cls(raw["status"], str(raw.get("msg_id") or ""), int(raw.get("queue", -1)),
                       int(raw.get("queue_offset", -1)), int(raw.get("phys_offset", -1)),
                       raw.get("uniq_key"), str(raw.get("reason") or ""))
        except (TypeError, ValueError) as exc:
            raise ReplyError(f"malformed send result {raw!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """A stored message with every field RocketMQ keeps (MessageExt)."""

    topic: str
    queue: int
    queue_offset: int
    phys_offset: int
    size: int
    flag: int
    sys_flag: int
    tags: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str]
    body: bytes
    born_ms: int
    born_host: tuple[str, int]
    store_ms: int
    store_host: tuple[str, int]
    reconsume_times: int
    msg_id: str
    uniq_key: str | None

    @classmethod
    def from_wire(cls, raw: Any) -> ReceivedMessage:
        if not isinstance(raw, dict):
            raise ReplyError(f"a message must be a map, got {type(raw).__name__}")
        try:
            return cls(
                topic=str(raw["topic"]), queue=int(raw["queue"]), queue_offset=int(raw["queue_offset"]),
                phys_offset=int(raw["phys_offset"]), size=int(raw["size"]), flag=int(raw["flag"]),
                sys_flag=int(raw["sys_flag"]), tags=raw.get("tags"), keys=tuple(raw.get("keys") or ()),
                properties=dict(raw.get("props") or {}), body=_plain(bytes(raw["body"]), int(raw["sys_flag"])),
                born_ms=int(raw["born_ms"]),
                born_host=_host(raw["born_host"]), store_ms=int(raw["store_ms"]),
                store_host=_host(raw["store_host"]), reconsume_times=int(raw["reconsume_times"]),
                msg_id=str(raw["msg_id"]), uniq_key=raw.get("uniq_key"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplyError(f"malformed message: {exc!r}") from None


def _plain(body: bytes, sys_flag: int) -> bytes:
    """The body as its producer gave it: RocketMQ clients zlib-compress large bodies and mark them
    (sysFlag 0x1); a body that does not inflate is handed over as stored rather than lost."""
    if not sys_flag & COMPRESSED:
        return body
    try:
        return zlib.decompress(body)
    except zlib.error:
        return body


def _host(raw: Any) -> tuple[str, int]:
    ip, port = raw
    return str(ip), int(port)
