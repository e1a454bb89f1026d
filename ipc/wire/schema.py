"""Wire messages: msgpack maps, version 1, one map per ZeroMQ frame, optionally followed by binary parts.

Every request carries ``v`` (schema version), ``op`` and a client-chosen ``id`` echoed in the reply.
Its fields are one typed value of ``mqstore.ipc.wire.requests`` (the ``Op`` enum, one frozen class
per op), whose ``encode`` builds the map and whose decoder, called once where the request comes in,
gives the class back. Replies carry ``ok`` (``ok_reply``); a refused request gets ``ok: false`` with a
``status`` and a ``reason`` (``error_reply``). Nothing is ever unpickled: decoding accepts msgpack's
plain types only, with size limits, and a frame that is not a map of the expected shape is a
``SchemaError`` naming the field, which the receiving actor turns into a BAD_REQUEST reply.

Internal notices between actors (PUB/SUB) are two frames: a topic (``b"dispatch"``, ``b"tick"``,
``b"written"``, ``b"flushed"``, ``b"arrived"``, ``b"indexed"``) and a msgpack map, each a typed value
of ``mqstore.ipc.wire.notices``. PUB/SUB may drop; everything a notice says can be recovered from the files, so a
lost notice only delays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgpack

from mqstore.engine.errors import MqstoreError

VERSION = 1
MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_PARTS = 16

# replies' status values beyond the engine's PutStatus / GetStatus names
BAD_REQUEST = "BAD_REQUEST"
UNKNOWN_OP = "UNKNOWN_OP"
SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
NOT_FOUND = "NOT_FOUND"
NO_PERMISSION = "NO_PERMISSION"  # RocketMQ's ResponseCode 16: the request is not this client's to make

# PUB/SUB topics
DISPATCH = b"dispatch"
TICK = b"tick"
WRITTEN = b"written"
FLUSHED = b"flushed"
ARRIVED = b"arrived"
INDEXED = b"indexed"
TOPIC_DELETED = b"topic-deleted"
REPLICATED = b"replicated"


class SchemaError(MqstoreError, ValueError):
    """A frame that is not a valid message: the reply says why, the actor goes on."""


def pack(message: dict[str, Any]) -> bytes:
    return msgpack.packb(message, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(frame: bytes | memoryview, *, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """Decode one frame into a map with a supported version; raises SchemaError otherwise."""
    if len(frame) > max_bytes:
        raise SchemaError(f"frame of {len(frame)} bytes exceeds the {max_bytes}-byte limit")
    try:
        message = msgpack.unpackb(frame, raw=False, strict_map_key=True, max_bin_len=max_bytes,
                                  max_str_len=max_bytes, max_array_len=1_000_000, max_map_len=100_000)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise SchemaError(f"not a msgpack frame: {exc}") from None
    if not isinstance(message, dict):
        raise SchemaError(f"expected a map, got {type(message).__name__}")
    if message.get("v") != VERSION:
        raise SchemaError(f"unsupported schema version {message.get('v')!r} (this broker speaks {VERSION})")
    return message


def pack_message(message: dict[str, Any], parts: Sequence[bytes | memoryview] = ()) -> list[bytes | memoryview]:
    """A message's frames: its map (announcing the parts when there are any), then the parts."""
    if not parts:
        return [pack(message)]
    if len(parts) > MAX_PARTS:
        raise ValueError(f"a message carries at most {MAX_PARTS} parts, not {len(parts)}")
    return [pack({**message, "parts": len(parts)}), *parts]


def unpack_message(frame: bytes | memoryview, parts: Sequence[bytes | memoryview] = (), *,
                   max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """Decode a map frame and the parts that came after it (``max_bytes`` bounds them all together):
    the map must announce exactly as many; raises SchemaError otherwise. Decoded, ``parts`` is the
    list of them (absent when there are none)."""
    total = len(frame) + sum(len(p) for p in parts)
    if total > max_bytes:
        raise SchemaError(f"a message of {total} bytes exceeds the {max_bytes}-byte limit")
    message = unpack(frame, max_bytes=max_bytes)
    announced = message.pop("parts", 0)
    if isinstance(announced, bool) or not isinstance(announced, int) or not 0 <= announced <= MAX_PARTS:
        raise SchemaError(f"field 'parts' must count the frames after the map (0 to {MAX_PARTS}), "
                          f"got {announced!r}"[:200])
    if announced != len(parts):
        raise SchemaError(f"the map announces {announced} part(s), {len(parts)} frame(s) follow it")
    if parts:
        message["parts"] = list(parts)
    return message


def request(op: str, request_id: int, **fields: Any) -> dict[str, Any]:
    return {"v": VERSION, "op": op, "id": request_id, **fields}


def ok_reply(request_id: Any, **fields: Any) -> dict[str, Any]:
    return {"v": VERSION, "id": request_id, "ok": True, **fields}


def error_reply(request_id: Any, status: str, reason: str) -> dict[str, Any]:
    return {"v": VERSION, "id": request_id, "ok": False, "status": status, "reason": reason}


def field(message: dict[str, Any], name: str, kind: type | tuple[type, ...], *, default: Any = ...,
          lo: int | None = None, hi: int | None = None) -> Any:
    """One typed field of a request, bounded when it is a number; raises SchemaError."""
    value = message.get(name)
    if value is None:
        if default is ...:
            raise SchemaError(f"missing field {name!r}")
        return default
    if type(value) is not kind:  # exactly the kind asked for (most fields): neither check can fail
        if isinstance(value, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise SchemaError(f"field {name!r} must be {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise SchemaError(f"field {name!r} must be {_kind_name(kind)}, got {type(value).__name__}")
    if (lo is not None or hi is not None) and isinstance(value, int) and not isinstance(value, bool):
        if lo is not None and value < lo:
            raise SchemaError(f"field {name!r} = {value} is below {lo}")
        if hi is not None and value > hi:
            raise SchemaError(f"field {name!r} = {value} is above {hi}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)
