"""A channel's event-loop path: the running loop's own DEALER socket per route, read by the loop itself.

A caller on an event loop (the remoting front) that hands its requests to the channel's I/O thread
pays two thread handoffs each way beyond libzmq's: the loop wakes the I/O thread, which sends; the
reply wakes the I/O thread, which completes a future that wakes the loop (``call_soon_threadsafe``).
Here the request goes out from the loop and the reply wakes the loop directly: each socket's
ZeroMQ descriptor is a reader of the loop, and the loop drains the socket when it turns readable.

The exchange follows ``mqstore.ipc.transport.exchange``'s rules (sent without blocking, a reply
matched by its id, a late one dropped, an ``ok: false`` raising BrokerError, a timeout raising
BrokerTimeoutError). Many requests may wait at once on one socket. A push (``on_push``) runs on the
loop. The sockets are made on a route's first request, from the channel's context (so CURVE rides
on ``tcp://`` routes) and with the I/O thread's options, all on the first loop that asks; close them
on that loop, or once it has ended.

ZeroMQ's descriptor is edge-triggered and says only that the socket's state may have changed: a send
may take in a reply's arrival, leaving the descriptor quiet, so the socket is drained after every send
as well as when the descriptor fires.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
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
from mqstore.ipc.transport.sockets import MAX_INBOUND_BYTES, connect, has_message, recv_message


class LoopSockets:
    """One event loop's DEALERs on a channel's routes, and the requests waiting on them."""

    def __init__(self, ctx: zmq.Context[Any], routes: Mapping[str, Sequence[str]], on_push: OnPush | None,
                 limits: Mapping[str, int]) -> None:
        """``limits``: the most bytes a request on a route may carry (the channel's, kept up to date there)."""
        self._ctx = ctx
        self._routes = routes
        self._on_push = on_push
        self._limits = limits
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sockets: dict[str, zmq.Socket[Any]] = {}
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._closed = False

    async def request(self, route: str, message: dict[str, Any], parts: Sequence[bytes | memoryview],
                      timeout_ms: int) -> dict[str, Any]:
        """Send ``message`` on the loop's socket for ``route`` and await its reply."""
        sock = self._socket(route)
        request_id: int = message["id"]
        send_request(sock, route, message, parts, self._limits.get(route, MAX_INBOUND_BYTES))
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._drain(route)  # the send may have taken in the descriptor's edge for a waiting reply
            async with asyncio.timeout(timeout_ms / 1000):
                return await future
        except TimeoutError:
            if future.done() and not future.cancelled():  # served as the deadline passed: the reply stands
                return future.result()
            raise timed_out(str(message["op"]), request_id) from None
        finally:
            self._pending.pop(request_id, None)

    def close(self) -> None:
        """Fail the requests waiting (BrokerError CLOSED) and close the sockets; later requests raise."""
        if self._closed:
            return
        self._closed = True
        loop = self._loop
        running = loop is not None and not loop.is_closed()
        for sock in self._sockets.values():
            if running:
                assert loop is not None
                loop.remove_reader(sock.fileno())
            sock.close(linger=0)
        self._sockets.clear()
        waiting, self._pending = list(self._pending.values()), {}
        for future in waiting:
            if running and not future.done():
                future.set_exception(BrokerError(CLOSED, "the client was closed before a reply came"))

    def open_count(self) -> int:
        return len(self._sockets)

    def _socket(self, route: str) -> zmq.Socket[Any]:
        if self._closed:
            raise BrokerError(CLOSED, "the client is closed")
        sock = self._sockets.get(route)
        if sock is not None:
            return sock
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise RuntimeError("a channel's loop sockets serve the one event loop that first used them")
        sock = connect(self._ctx, zmq.DEALER, list(self._routes[route]), max_msg_bytes=MAX_REPLY_BYTES)
        self._sockets[route] = sock
        loop.add_reader(sock.fileno(), self._drain, route)
        return sock

    def _drain(self, route: str) -> None:
        """Every reply waiting on ``route``'s socket, each to its request's future."""
        sock = self._sockets.get(route)
        while sock is not None and has_message(sock):
            try:
                (frame,), parts = recv_message(sock, zmq.NOBLOCK, head=1)
            except zmq.Again:
                return
            answer = decode_reply(route, frame, parts, self._on_push)
            if answer is None:
                continue
            future = self._pending.pop(answer[0], None)
            if future is None or future.done():
                continue  # the reply to a request that timed out, was cancelled, or was never ours
            try:
                future.set_result(outcome(answer[1]))
            except BrokerError as exc:
                future.set_exception(exc)
            sock = self._sockets.get(route)  # a push's handler may have closed the channel
