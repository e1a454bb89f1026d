"""Socket construction with the limits stated, never left to defaults: high-water marks, linger,
receive timeouts, and a cap on inbound message size."""

from __future__ import annotations

from typing import Any

import zmq

DEFAULT_HWM = 10_000
DEFAULT_LINGER_MS = 0
MAX_INBOUND_BYTES = 64 * 1024 * 1024


def make_socket(ctx: zmq.Context[Any], kind: int, *, hwm: int = DEFAULT_HWM, rcvhwm: int | None = None,
                linger_ms: int = DEFAULT_LINGER_MS, rcvtimeo_ms: int = -1, max_msg_bytes: int = MAX_INBOUND_BYTES,
                subscribe: tuple[bytes, ...] = ()) -> zmq.Socket[Any]:
    """``hwm`` for both directions, unless ``rcvhwm`` sets the inbound one apart."""
    sock: zmq.Socket[Any] = ctx.socket(kind)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.RCVHWM, hwm if rcvhwm is None else rcvhwm)
    sock.setsockopt(zmq.LINGER, linger_ms)
    sock.setsockopt(zmq.RCVTIMEO, rcvtimeo_ms)
    sock.setsockopt(zmq.MAXMSGSIZE, max_msg_bytes)
    if kind == zmq.ROUTER:
        sock.setsockopt(zmq.ROUTER_MANDATORY, 0)  # a vanished peer's reply is dropped, not an error
    for topic in subscribe:
        sock.setsockopt(zmq.SUBSCRIBE, topic)
    return sock


def bind(ctx: zmq.Context[Any], kind: int, endpoint: str, **options: Any) -> zmq.Socket[Any]:
    """The stable side binds. A stale ipc file left by a killed process is replaced by bind."""
    sock = make_socket(ctx, kind, **options)
    sock.bind(endpoint)
    return sock


def connect(ctx: zmq.Context[Any], kind: int, endpoint: str | list[str], **options: Any) -> zmq.Socket[Any]:
    sock = make_socket(ctx, kind, **options)
    for address in [endpoint] if isinstance(endpoint, str) else endpoint:
        sock.connect(address)
    return sock
