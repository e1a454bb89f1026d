"""The client's transport: one background I/O thread owning every DEALER socket of a client object.

ZeroMQ sockets are not thread-safe, so only the I/O thread touches them. Callers hand requests over
through a queue (and a byte on a pipe that wakes the thread's poll) and get a ``Future`` back. Each
request carries an id unique to the channel; a reply is matched to its request by that id, and a
reply whose request already timed out (or was abandoned) is dropped (``mqstore.ipc.transport.exchange``: the rules).
A caller that would wait on the future at once calls ``request`` instead: the same exchange made on
a socket of the calling thread's own (``mqstore.ipc.transport.caller_sockets``), without the handoff;
a caller on an event loop awaits ``request_on_loop``: the loop's own sockets, whose replies wake the
loop itself (``mqstore.ipc.transport.loop_sockets``).

A request or a reply may carry binary parts after its map (``mqstore.ipc.wire.schema``): a request's ``parts``
go out without a copy (so they must not change once handed over), and a reply's parts come back
in its ``parts`` field as memoryviews of ZeroMQ's buffers.

A broker actor may also send a client a message of its own, a *push* (a map with ``push`` naming it
and no ``id``: the transaction actor's ``check_transaction``): it goes to the channel's ``on_push``
(route, map), on the thread whose socket received it (the I/O thread, for a route registered with
``call``), so that too must be quick; without one it is dropped.

The thread's poll sleeps until the next request deadline, the next delayed send, or a wake-up: no
busy loop. Futures complete on the I/O thread, so ``add_done_callback`` callbacks run there and
should be quick.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

import zmq

from mqstore.ipc.transport.caller_sockets import CallerSockets
from mqstore.ipc.transport.curve import CurveContext, CurveKeys
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.transport.exchange import CLOSED as CLOSED
from mqstore.ipc.transport.exchange import MAX_REPLY_BYTES as MAX_REPLY_BYTES
from mqstore.ipc.transport.exchange import REQUEST_TOO_LARGE as REQUEST_TOO_LARGE
from mqstore.ipc.transport.exchange import SEND_QUEUE_FULL as SEND_QUEUE_FULL
from mqstore.ipc.transport.exchange import BrokerError as BrokerError
from mqstore.ipc.transport.exchange import BrokerTimeoutError as BrokerTimeoutError
from mqstore.ipc.transport.exchange import decode_reply, outcome, send_request, timed_out
from mqstore.ipc.transport.loop_sockets import LoopSockets
from mqstore.ipc.transport.sockets import MAX_INBOUND_BYTES, connect, recv_message
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.replies import QueueInfoReply
from mqstore.ipc.wire.requests import QueueInfo, Request

log = logging.getLogger("mqstore.client")


def resolve_endpoints(store_dir: str | os.PathLike[str] | None, endpoints: Endpoints | None,
                      reader_count: int = 1) -> Endpoints:
    """The broker's endpoints: given, or derived from the store directory (its private run dir),
    whose run directory is this user's alone before any ``ipc://`` socket in it is trusted
    (``Endpoints.prepare``: EndpointError otherwise)."""
    if endpoints is None:
        if store_dir is None:
            raise ValueError("give the store directory or the endpoints of the broker")
        if reader_count < 1:
            raise ValueError(f"reader_count must be at least 1, got {reader_count}")
        endpoints = Endpoints.for_store(os.fspath(store_dir), reader_count)
    if not endpoints.uses_tcp:
        endpoints.prepare()
    return endpoints


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(order=True, slots=True)
class _Outgoing:
    send_at_ms: int
    seq: int
    route: str = field(compare=False)
    message: dict[str, Any] = field(compare=False)
    timeout_ms: int = field(compare=False)
    future: Future[Any] = field(compare=False)  # a timer's holds None
    parts: Sequence[bytes | memoryview] = field(compare=False, default=())
    timer: Callable[[], None] | None = field(compare=False, default=None)  # ``call_later``'s: no request


@dataclass(slots=True)
class _Pending:
    future: Future[dict[str, Any]]
    op: str


class Channel:
    """Request/reply over DEALER sockets, one per route (a name for a list of endpoints)."""

    def __init__(self, routes: Mapping[str, Sequence[str]], *, name: str = "mqstore-client",
                 curve: CurveKeys | None = None,
                 on_push: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        """``curve``: the client's CURVE keys, used on ``tcp://`` routes; ``on_push``: what takes pushes."""
        self._on_push = on_push
        if not routes:
            raise ValueError("a channel needs at least one route")
        self._routes = {route: list(endpoints) for route, endpoints in routes.items()}
        self._ctx: zmq.Context[Any] = CurveContext(curve)
        self._limits: dict[str, int] = {}  # a route's request limit, once the broker said it (``limit``)
        self._callers = CallerSockets(self._ctx, self._routes, on_push, self._limits)
        self._on_loop = LoopSockets(self._ctx, self._routes, on_push, self._limits)
        self._ids = itertools.count(1)
        self._inbox: queue.SimpleQueue[_Outgoing] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._lock = threading.Lock()
        self._closed = False
        self._wake_pending = False  # a wake-up written and the inbox not yet taken since: no second write
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._ctx.term()
            raise self._startup_error

    # -- callers' side -------------------------------------------------------------------------------

    def limit(self, route: str, max_bytes: int) -> None:
        """The most bytes the broker takes in one request on ``route`` (its socket drops a bigger one,
        unanswered): a request over it fails at once with REQUEST_TOO_LARGE. Until told, the
        broker's default (``MAX_INBOUND_BYTES``)."""
        self._limits[route] = max_bytes

    def on_io_thread(self) -> bool:
        """Whether the caller is this channel's I/O thread (a callback), which must never wait on a reply."""
        return threading.current_thread() is self._thread

    def call(self, route: str, op: str | Request, *, timeout_ms: int, delay_ms: int = 0,
             parts: Sequence[bytes | memoryview] = (), **fields: Any) -> Future[dict[str, Any]]:
        """Send a request (``mqstore.ipc.wire.requests``; or an op and its fields, a map of no class)
        on ``route``; the future holds the ok reply, or raises BrokerError or BrokerTimeoutError.
        ``delay_ms`` holds the send back (retry backoff); the timeout counts from the send. ``parts``
        (a request's own, or those given) follow the map as frames of their own, without a copy."""
        parts = self._parts(route, op, parts)
        future: Future[dict[str, Any]] = Future()
        request_id = next(self._ids)
        item = _Outgoing(_now_ms() + max(0, delay_ms), request_id, route, _message(op, request_id, fields),
                         timeout_ms, future, tuple(parts))
        with self._lock:
            if self._closed:
                raise BrokerError(CLOSED, "the client is closed")
            self._inbox.put(item)
            if not self._wake_pending:  # one wake-up for the requests of a round (a consumer's pulls)
                self._wake()
                self._wake_pending = True  # after the write: a write that raised leaves the next call to wake
        return future

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Future[None]:
        """Run ``callback`` on the I/O thread in ``delay_ms`` (a timer: no request goes out); cancelling
        the future before then stops it. It never runs once the channel is closed."""
        future: Future[None] = Future()
        item = _Outgoing(_now_ms() + max(0, delay_ms), next(self._ids), "", {}, 0, future,
                         timer=callback)
        with self._lock:
            if self._closed:
                raise BrokerError(CLOSED, "the client is closed")
            self._inbox.put(item)
            if not self._wake_pending:
                self._wake()
                self._wake_pending = True
        return future

    def _parts(self, route: str, op: str | Request, parts: Sequence[bytes | memoryview]
               ) -> Sequence[bytes | memoryview]:
        """The frames after a request's map (a typed request's own), once its route and count are checked."""
        if isinstance(op, Request):
            parts = op.parts
        if route not in self._routes:
            raise ValueError(f"unknown route {route!r}")
        if len(parts) > schema.MAX_PARTS:
            raise ValueError(f"a request carries at most {schema.MAX_PARTS} parts")
        return parts

    def request(self, route: str, op: str | Request, *, timeout_ms: int, parts: Sequence[bytes | memoryview] = (),
                **fields: Any) -> dict[str, Any]:
        """``call(...).result()`` made on the calling thread's own socket (``mqstore.ipc.transport.caller_sockets``):
        the ok reply, or BrokerError or BrokerTimeoutError; for a caller that waits at once."""
        parts = self._parts(route, op, parts)
        if self._closed:
            raise BrokerError(CLOSED, "the client is closed")
        return self._callers.request(route, _message(op, next(self._ids), fields), parts, timeout_ms)

    async def request_on_loop(self, route: str, op: str | Request, *, timeout_ms: int,
                              parts: Sequence[bytes | memoryview] = (), **fields: Any) -> dict[str, Any]:
        """``request`` awaited on the running event loop, made on the loop's own socket: the ok reply,
        or BrokerError or BrokerTimeoutError. One loop only; ``close_loop_sockets`` on it at its end."""
        parts = self._parts(route, op, parts)
        if self._closed:
            raise BrokerError(CLOSED, "the client is closed")
        return await self._on_loop.request(route, _message(op, next(self._ids), fields), parts, timeout_ms)

    def close_loop_sockets(self) -> None:
        """Close the event loop's sockets, on that loop (``close`` does it too, once the loop has ended):
        requests awaited on them fail with BrokerError(CLOSED)."""
        self._on_loop.close()

    def close(self) -> None:
        """Stop the I/O thread and close the callers' and the loop's sockets; requests still waiting fail
        with BrokerError(CLOSED), a synchronous one in progress is waited for (at most its timeout)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wake()
        self._thread.join()
        self._callers.close()
        self._on_loop.close()
        self._ctx.term()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _wake(self) -> None:
        # a full pipe already holds wake-ups enough: the thread is bound to look
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"\0")

    # -- the I/O thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        ctx = self._ctx
        sockets: dict[str, zmq.Socket[Any]] = {}
        pending: dict[int, _Pending] = {}
        deadlines: list[tuple[int, int]] = []  # (deadline_ms, request id); answered ones are skipped
        delayed: list[_Outgoing] = []
        try:
            try:
                for route, endpoints in self._routes.items():
                    sockets[route] = connect(ctx, zmq.DEALER, endpoints, max_msg_bytes=MAX_REPLY_BYTES)
            except BaseException as exc:  # a bad endpoint: the constructor raises it
                self._startup_error = exc
                return
            finally:
                self._ready.set()
            poller = zmq.Poller()
            for sock in sockets.values():
                poller.register(sock, zmq.POLLIN)
            poller.register(self._wake_r, zmq.POLLIN)
            by_socket = {sock: route for route, sock in sockets.items()}
            while True:
                while deadlines and deadlines[0][1] not in pending:
                    heapq.heappop(deadlines)
                due = [d[0] for d in deadlines[:1]] + [d.send_at_ms for d in delayed[:1]]
                timeout_ms = max(0, min(due) - _now_ms()) if due else None
                events = dict(poller.poll(timeout_ms))
                if self._wake_r in events:
                    self._drain_wakeups()
                with self._lock:
                    closing = self._closed
                    self._wake_pending = False  # what is put from here on wakes this thread again
                while not self._inbox.empty():  # this thread alone takes from it
                    heapq.heappush(delayed, self._inbox.get_nowait())
                if closing:
                    break
                now = _now_ms()
                while delayed and delayed[0].send_at_ms <= now:
                    self._send(sockets, pending, deadlines, heapq.heappop(delayed), now)
                for sock in sockets.values():
                    if sock in events:
                        self._receive(sock, by_socket[sock], pending)
                self._expire(pending, deadlines, _now_ms())
        finally:
            failed = [p.future for p in pending.values()] + [d.future for d in delayed]
            while True:
                try:
                    failed.append(self._inbox.get_nowait().future)
                except queue.Empty:
                    break
            for future in failed:
                if not future.done():
                    future.set_exception(BrokerError(CLOSED, "the client was closed before a reply came"))
            for sock in sockets.values():
                sock.close(linger=0)

    def _drain_wakeups(self) -> None:
        # a short read took every byte there was: no second read to fail with EAGAIN (an exception a wake-up)
        with contextlib.suppress(BlockingIOError):
            while len(os.read(self._wake_r, 4096)) == 4096:
                pass

    def _send(self, sockets: dict[str, zmq.Socket[Any]], pending: dict[int, _Pending],
              deadlines: list[tuple[int, int]], item: _Outgoing, now_ms: int) -> None:
        if not item.future.set_running_or_notify_cancel():
            return  # cancelled by the caller before it went out
        if item.timer is not None:
            try:
                item.timer()
            except Exception as exc:  # a timer's fault must not stop the thread every request needs
                log.exception("a client timer failed")
                item.future.set_exception(exc)
            else:
                item.future.set_result(None)
            return
        try:
            send_request(sockets[item.route], item.route, item.message, item.parts,
                         self._limits.get(item.route, MAX_INBOUND_BYTES))
        except BrokerError as exc:
            item.future.set_exception(exc)
            return
        pending[item.seq] = _Pending(item.future, str(item.message["op"]))
        heapq.heappush(deadlines, (now_ms + item.timeout_ms, item.seq))

    def _receive(self, sock: zmq.Socket[Any], route: str, pending: dict[int, _Pending]) -> None:
        while True:
            try:
                (frame,), parts = recv_message(sock, zmq.NOBLOCK, head=1)
            except zmq.Again:
                return
            answer = decode_reply(route, frame, parts, self._on_push)
            if answer is None:
                continue
            waiting = pending.pop(answer[0], None)
            if waiting is None:
                continue  # the reply to a request that timed out, or was never ours
            try:
                waiting.future.set_result(outcome(answer[1]))
            except BrokerError as exc:
                waiting.future.set_exception(exc)

    def _expire(self, pending: dict[int, _Pending], deadlines: list[tuple[int, int]], now_ms: int) -> None:
        while deadlines and deadlines[0][0] <= now_ms:
            _, request_id = heapq.heappop(deadlines)
            waiting = pending.pop(request_id, None)
            if waiting is not None:
                waiting.future.set_exception(timed_out(waiting.op, request_id))


class PullState(Protocol):
    """A queue's pull bookkeeping as both consumers keep it."""

    in_flight: Future[Any] | None
    retry_at_ms: int


def queue_spans(channel: Channel, route: str, topic: str, timeout_ms: int) -> dict[int, tuple[int, int]]:
    """Queue id -> published (min, max) of ``topic``, asked of ``route``: none when it has no queues."""
    reply = channel.request(route, QueueInfo(topic), timeout_ms=timeout_ms)
    return QueueInfoReply.decode(reply).queues


PULL_ERROR_BACKOFF_MS = 500
CLIENT_FAULTS = frozenset({"BAD_REQUEST", "UNKNOWN_OP"})  # our own bug: raise, never retry


def pull_reply(state: PullState, future: Future[Any], what: str) -> dict[str, Any] | None:
    """The reply of a queue's pull, or None when the pull is to be made again: timed out (at once)
    or refused by the broker (after a back-off). A refusal that is the client's fault raises."""
    state.in_flight = None
    try:
        reply: dict[str, Any] = future.result()
        return reply
    except BrokerTimeoutError:
        log.warning("%s: pull timed out; trying again", what)
    except BrokerError as exc:
        if exc.status in CLIENT_FAULTS:
            raise
        log.warning("%s: pull refused (%s); backing off", what, exc)
        state.retry_at_ms = _now_ms() + PULL_ERROR_BACKOFF_MS
    return None


def _message(op: str | Request, request_id: int, fields: dict[str, Any]) -> dict[str, Any]:
    """A request's map: a class's own encoding, or an op and its fields."""
    if isinstance(op, Request):
        if fields:
            raise TypeError(f"a {type(op).__name__} carries its fields; got {sorted(fields)} besides")
        return op.encode(request_id)
    return schema.request(op, request_id, **fields)
