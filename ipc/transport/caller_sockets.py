"""A channel's synchronous path: each calling thread makes its exchanges (``mqstore.ipc.transport.exchange``) on DEALER
sockets of its own, one per route, and waits on them itself.

A caller that blocks on the reply at once gains nothing from the I/O thread and pays for the handoff
(a pipe to wake it, a future, the GIL passed twice between threads); here the request goes out and the
reply comes back on the caller's thread. A thread's sockets are made on its first call on a route,
from the channel's context (so CURVE rides on ``tcp://`` routes) and with the I/O thread's options.

Each thread waits on one request at a time per socket, so a reply with another id is a late one, to
a request of this thread's that timed out: it is dropped. The sockets of threads that have ended are
closed when a new thread comes, and every thread's when the channel closes; a close waits for a call
in progress on another thread (at most its timeout), and a call after it raises BrokerError(CLOSED).
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import zmq

from mqstore.ipc.transport.exchange import (
    CLOSED,
    MAX_REPLY_BYTES,
    BrokerError,
    OnPush,
    decode_reply,
    outcome,
    send_request,
    timed_out,
)
from mqstore.ipc.transport.sockets import MAX_INBOUND_BYTES, connect, recv_message


@dataclass(slots=True)
class _ThreadSockets:
    """One thread's sockets; ``lock`` is held while they are used, and by the close."""

    thread: weakref.ref[threading.Thread]
    lock: threading.Lock = field(default_factory=threading.Lock)
    sockets: dict[str, zmq.Socket[Any]] = field(default_factory=dict)
    closed: bool = False

    def close(self) -> None:
        with self.lock:
            self.closed = True
            for sock in self.sockets.values():
                sock.close(linger=0)
            self.sockets.clear()


class CallerSockets:
    """Per-thread DEALERs on a channel's routes, registered so that the channel can close them all."""

    def __init__(self, ctx: zmq.Context[Any], routes: Mapping[str, Sequence[str]], on_push: OnPush | None,
                 limits: Mapping[str, int]) -> None:
        """``limits``: the most bytes a request on a route may carry (the channel's, kept up to date there)."""
        self._ctx = ctx
        self._limits = limits
        self._routes = routes
        self._on_push = on_push
        self._local = threading.local()
        self._lock = threading.Lock()
        self._threads: list[_ThreadSockets] = []
        self._closed = False

    def request(self, route: str, message: dict[str, Any], parts: Sequence[bytes | memoryview],
                timeout_ms: int) -> dict[str, Any]:
        """Send ``message`` on this thread's socket for ``route`` and wait for its reply."""
        own = self._own()
        request_id = message["id"]
        with own.lock:
            if own.closed:
                raise BrokerError(CLOSED, "the client is closed")
            sock = own.sockets.get(route)
            if sock is None:
                sock = own.sockets[route] = connect(self._ctx, zmq.DEALER, list(self._routes[route]),
                                                    max_msg_bytes=MAX_REPLY_BYTES)
            send_request(sock, route, message, parts, self._limits.get(route, MAX_INBOUND_BYTES))
            deadline_ns = time.monotonic_ns() + timeout_ms * 1_000_000
            while True:
                left_ms = math.ceil((deadline_ns - time.monotonic_ns()) / 1_000_000)
                if left_ms <= 0:
                    raise timed_out(str(message["op"]), request_id)
                sock.setsockopt(zmq.RCVTIMEO, left_ms)
                try:
                    (frame,), reply_parts = recv_message(sock, head=1)
                except zmq.Again:
                    raise timed_out(str(message["op"]), request_id) from None
                answer = decode_reply(route, frame, reply_parts, self._on_push)
                if answer is not None and answer[0] == request_id:
                    return outcome(answer[1])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
        for own in threads:
            own.close()

    def _own(self) -> _ThreadSockets:
        own: _ThreadSockets | None = getattr(self._local, "own", None)
        if own is not None:
            return own
        own = _ThreadSockets(weakref.ref(threading.current_thread()))
        with self._lock:
            if self._closed:
                raise BrokerError(CLOSED, "the client is closed")
            ended = [t for t in self._threads if not _alive(t)]
            self._threads = [t for t in self._threads if _alive(t)]
            self._threads.append(own)
        for gone in ended:
            gone.close()
        self._local.own = own
        return own

    def open_count(self) -> int:
        """Sockets open now, every thread's together."""
        with self._lock:
            return sum(len(t.sockets) for t in self._threads)


def _alive(own: _ThreadSockets) -> bool:
    thread = own.thread()
    return thread is not None and thread.is_alive()
