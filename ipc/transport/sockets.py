"""Socket construction with the limits stated, never left to defaults: high-water marks, linger,
receive timeouts, a cap on inbound message size, and the size from which frames go without a copy.

A message may carry binary parts after its map (``mqstore.ipc.wire.schema``: ``pack_message``, ``unpack_message``).
They travel without copies: sent with ``copy=False`` (ZeroMQ reads the caller's buffer; frames under
``ZERO_COPY_MIN_BYTES`` are copied all the same, which is cheaper for them), and received as
memoryviews of ZeroMQ's own buffers (``recv_message``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import zmq

from mqstore.ipc.wire import schema

if TYPE_CHECKING:
    from mqstore.ipc.wire.notices import Notice

log = logging.getLogger("mqstore")

DEFAULT_HWM = 10_000
DEFAULT_LINGER_MS = 0
MAX_INBOUND_BYTES = 64 * 1024 * 1024
# pyzmq's zero-copy send costs a fixed few microseconds a frame (its collector thread drops the
# reference once ZeroMQ is done); measured here it breaks even with a copy near 32 KiB and saves
# 27 us at 128 KiB, 140 us at 420 KiB
ZERO_COPY_MIN_BYTES = 64 * 1024
# pyzmq's constants are enums, and an operation on one (``POLLIN & events``, ``SNDMORE | NOBLOCK``)
# costs more than a small send: the per-message helpers here use them as plain ints
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_RCVMORE = int(zmq.RCVMORE)
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE_NOBLOCK = int(zmq.SNDMORE | zmq.NOBLOCK)
_SNDMORE = int(zmq.SNDMORE)


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
    sock.copy_threshold = ZERO_COPY_MIN_BYTES
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


def has_message(sock: zmq.Socket[Any]) -> bool:
    """Whether a message waits on ``sock``. A loop draining a socket asks this rather than receive
    until zmq.Again: asking costs less than the exception, which it would otherwise pay every round."""
    return bool(int(sock.getsockopt(_EVENTS)) & _POLLIN)


def recv_first(sock: zmq.Socket[Any], flags: int = 0) -> tuple[bytes, str | None]:
    """A message's first frame, and the User-Id the ZAP handler gave its sender's connection (a
    CURVE client's public key, in Z85; ``mqstore.ipc.transport.curve``), None where there is none.
    The rest follows with ``recv_routed`` or ``recv_message`` given ``first``. The frame is taken
    without a copy to read its metadata, which costs a few microseconds a message more than
    ``recv``: only a socket whose requests must say whose key sent them (CURVE roles) asks."""
    frame = sock.recv(flags, copy=False)
    try:
        user_id = frame.get("User-Id")
    except zmq.ZMQError:  # no ZAP handler answered for this connection (ipc://, plain TCP)
        return frame.bytes, None
    return frame.bytes, user_id if isinstance(user_id, str) else None


def recv_routed(router: zmq.Socket[Any], first: bytes | None = None) -> list[bytes]:
    """A message waiting on a ROUTER, every frame (the sender's identity first), without blocking
    (raises zmq.Again): ``recv_multipart(zmq.NOBLOCK)`` without its per-frame enum work. ``first``:
    the identity frame, already read (``recv_first``)."""
    frames: list[bytes] = [router.recv(_NOBLOCK) if first is None else first]
    while router.getsockopt(_RCVMORE):
        frames.append(router.recv(_NOBLOCK))  # a message arrives whole: the rest is there
    return frames


def send_routed(router: zmq.Socket[Any], identity: bytes, frame: bytes | memoryview,
                *parts: bytes | memoryview) -> None:
    """A map frame and its binary ``parts`` (``schema.pack_message``) to the peer ``identity`` names,
    without blocking (raises zmq.Again): ``send_multipart([identity, frame, *parts], zmq.NOBLOCK)``
    as one send a frame, which cost less for a small reply. The parts go without a copy from
    ``ZERO_COPY_MIN_BYTES`` up (the socket's copy_threshold), so they must not change once sent."""
    router.send(identity, _SNDMORE_NOBLOCK)
    if not parts:
        router.send(frame, _NOBLOCK)
        return
    router.send(frame, _SNDMORE_NOBLOCK)
    for part in parts[:-1]:
        router.send(part, _SNDMORE_NOBLOCK, copy=False)
    router.send(parts[-1], _NOBLOCK, copy=False)


def recv_message(sock: zmq.Socket[Any], flags: int = 0, *, head: int,
                 first: bytes | None = None) -> tuple[list[bytes], list[memoryview]]:
    """One multipart message: its first ``head`` frames as bytes (a ROUTER's identity, the map), the
    frames after them without a copy, as memoryviews of ZeroMQ's buffers (each keeps its buffer
    alive). Copying the small head frames costs less than wrapping them. Raises zmq.Again like recv.
    ``first``: the first frame, already read (``recv_first``)."""
    frames = [sock.recv(flags) if first is None else first]
    while len(frames) < head and sock.getsockopt(_RCVMORE):
        frames.append(sock.recv())  # a message arrives whole: the rest is there once its first frame is
    parts = []
    # the socket's RCVMORE, not each part's ``Frame.more``: a part received without copying may
    # report no more parts where the socket still has them (the rest of the message was then read
    # as messages of their own: the writer answered one request several times)
    while sock.getsockopt(_RCVMORE):
        parts.append(sock.recv(copy=False).buffer)
    return frames, parts


def waiting_replies(sock: zmq.Socket[Any], who: str) -> Iterator[dict[str, Any]]:
    """Every reply already waiting on a DEALER, decoded, until none waits; one that does not decode
    is logged (``who`` says whose socket) and skipped."""
    while True:
        try:
            frame = sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return
        try:
            yield schema.unpack(frame)
        except schema.SchemaError as exc:
            log.warning("%s: ignoring a writer reply that does not decode: %s", who, exc)


def send_notice(pub: zmq.Socket[Any], notice: Notice) -> None:
    """A two-frame notice (its topic, its map) on a PUB socket: two sends, which cost a fraction of
    ``send_multipart``'s checks of every frame, paid by an actor that publishes one a round."""
    pub.send(notice.TOPIC, _SNDMORE)
    pub.send(notice.encode())


def send_frames(sock: zmq.Socket[Any], frames: list[bytes | memoryview], flags: int = 0) -> None:
    """``send_multipart(frames, flags)`` as one send a frame, its flags plain ints: a fraction of
    ``send_multipart``'s cost, which checks every frame and builds its flags an enum at a time (a
    dispatch notice of one record: 2 us against 12). ``flags`` an int (``zmq.NOBLOCK``, raising
    zmq.Again). A frame from ``ZERO_COPY_MIN_BYTES`` up goes without a copy, so it must not change
    once sent; smaller ones are copied, which costs less than wrapping them (frames of bytes: a
    memoryview is measured in its items)."""
    more = int(flags) | _SNDMORE
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        sock.send(frame, more if i < last else flags, copy=len(frame) < ZERO_COPY_MIN_BYTES)
