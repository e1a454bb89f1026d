"""One request/reply exchange on a DEALER socket: the rules every client path follows, whether the
Channel's I/O thread makes the exchange for a future (``mqstore.ipc.transport.channel``) or the calling thread makes it
on a socket of its own and waits (``mqstore.ipc.transport.caller_sockets``).

A request is a map (``schema.request``: op and an id unique to the channel) and its binary parts; it
goes out without blocking, so a broker that reads nothing fails it with SEND_QUEUE_FULL rather than
hanging the sender; one bigger than the broker takes (its socket would close the connection on it,
unanswered) fails at once with REQUEST_TOO_LARGE, naming the limit. A reply is matched to its request
by its id; one whose request is no longer waited for is dropped by the matcher. A map with ``push``
and no id is a message of the broker's own (``Channel``'s ``on_push``). An ``ok: false`` reply
raises BrokerError with the broker's status and reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from mqstore.engine.errors import MqstoreError
from mqstore.ipc.transport.sockets import MAX_INBOUND_BYTES
from mqstore.ipc.wire import schema

log = logging.getLogger("mqstore.client")

CLOSED = "CLOSED"
SEND_QUEUE_FULL = "SEND_QUEUE_FULL"
REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
MAX_REPLY_BYTES = 256 * 1024 * 1024

OnPush = Callable[[str, dict[str, Any]], None]


class BrokerError(MqstoreError):
    """The broker refused a request (``ok: false``), or the client could not deliver it."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


class BrokerTimeoutError(MqstoreError, TimeoutError):
    """No reply within the request's timeout; the request may or may not have been served."""


def send_request(sock: zmq.Socket[Any], route: str, message: dict[str, Any],
                 parts: Sequence[bytes | memoryview], max_bytes: int = MAX_INBOUND_BYTES) -> None:
    """Send without blocking; BrokerError when the request cannot go (queue full, not encodable, or
    over ``max_bytes``, the broker's limit: its socket would close the connection on it, unanswered)."""
    try:
        frames = schema.pack_message(message, parts)
        size = sum(len(f) for f in frames)
        if size > max_bytes:
            raise BrokerError(REQUEST_TOO_LARGE, f"{route}: a request of {size} bytes is over the broker's "
                                                 f"{max_bytes}-byte limit ([broker] max_request_bytes); not sent")
        if len(frames) == 1:
            sock.send(frames[0], zmq.NOBLOCK)
        else:  # parts from ZERO_COPY_MIN_BYTES up go out from the caller's buffers
            sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
    except zmq.Again:
        raise BrokerError(SEND_QUEUE_FULL, f"{route}: too many requests queued "
                                           "for a broker that does not read them") from None
    except (TypeError, ValueError) as exc:  # a field msgpack cannot encode
        raise BrokerError(schema.BAD_REQUEST, f"cannot encode the request: {exc}") from None


def decode_reply(route: str, frame: bytes, parts: list[memoryview], on_push: OnPush | None
                 ) -> tuple[int, dict[str, Any]] | None:
    """A received message's request id and map; None for one that does not decode (logged), a
    push (handed to ``on_push``, whose failure is logged: the socket serves other requests), or a
    map without an id."""
    try:
        reply = schema.unpack_message(frame, parts, max_bytes=MAX_REPLY_BYTES)
    except schema.SchemaError as exc:
        log.warning("%s: dropping a reply that does not decode: %s", route, exc)
        return None
    request_id = reply.get("id")
    if request_id is None and isinstance(reply.get("push"), str):
        if on_push is not None:
            try:
                on_push(route, reply)
            except Exception:
                log.exception("%s: the handler of a %r push failed", route, reply["push"])
        return None
    return (request_id, reply) if isinstance(request_id, int) else None


def outcome(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply when the broker served the request; BrokerError with its status and reason if not."""
    if reply.get("ok") is True:
        return reply
    raise BrokerError(str(reply.get("status", "UNKNOWN")), str(reply.get("reason", "")))


def timed_out(op: str, request_id: int) -> BrokerTimeoutError:
    return BrokerTimeoutError(f"no reply to {op!r} (request {request_id})")
