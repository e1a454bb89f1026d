"""The remoting front's listener: the ``remoting`` actor process, one asyncio TCP listener on which
stock RocketMQ clients speak RocketMQ's remoting protocol.

It serves both the NameServer requests and the broker requests (their codes do not collide;
clients keep one connection per address anyway). Each connection reads whole frames and serves each
request in its own task, since a held pull must never block the requests behind it on the same
socket; replies are written one whole frame at a time. What a request is answered with is
``mqstore.actors.remoting.front.BrokerFront``'s business; who is consuming is ``mqstore.actors.remoting.clients``'.

A frame that lies about its length, exceeds ``max_frame_bytes`` or has a header that is not a
command closes that connection with a log line; other clients never notice. Every client is
bounded: a connection with nothing read and nothing in flight for ``idle_timeout_ms`` is closed
(RocketMQ's serverChannelMaxIdleTimeSeconds), a frame must arrive whole and a reply leave whole
within ``frame_timeout_ms`` (a whole-frame deadline, not one per receive), past
``max_inflight_per_connection`` requests a client gets SYSTEM_BUSY, and so does one holding more than
its share once ``max_inflight`` are in flight in all. Who gets in, who makes room, and how many
half-read bytes the front holds is ``mqstore.actors.remoting.door``'s business.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import resource
from typing import Any

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.remoting.door import SMALL_FRAME_BYTES, Connection, Door, usable_connections
from mqstore.actors.remoting.front import BrokerFront
from mqstore.actors.remoting.headers import Peer
from mqstore.actors.remoting.registrar import Registrar, registrar_for
from mqstore.actors.runtime import Runtime
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.transport.channel import Channel

log = logging.getLogger("mqstore.remoting")

IDLE_WAKE_MS = 5_000  # the loop's wake-ups while nothing moves (the NameServer role's scan comes at most this late)
REFUSAL_LOG_MS = 1_000  # a flood of refusals is logged once a second, with its count


class RemotingActor:
    """Listens, reads frames, hands each request to the front and writes its reply back."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.config = runtime.config.remoting
        ep = runtime.endpoints
        routes = {"ingress": [ep.ingress], "transactions": [ep.transactions],
                  **{f"reader{i}": [ep.reader(i)] for i in range(ep.reader_count)}}
        self.channel = Channel(routes, name="mqstore-remoting", curve=ep.curve, on_push=self._on_push)
        self.front = BrokerFront(runtime.config, self.channel)
        self.front.transactions.push = self._push
        self._ids = itertools.count(1)
        cfg = self.config
        self.door = Door(usable_connections(cfg.max_connections, resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
                         cfg.max_connections_per_address, cfg.max_read_bytes, cfg.max_read_bytes_per_address)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pushes: set[asyncio.Task[None]] = set()
        self._refusals_logged_ms = -REFUSAL_LOG_MS
        self.requests = 0
        self.inflight = 0
        self.bad_frames = 0
        self.timed_out = 0

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            self.channel.close()

    def _on_push(self, route: str, push: dict[str, Any]) -> None:
        """A transaction check from the actor (on the loop, which the front's requests use, or on the
        channel's thread): the event loop sends it."""
        if self._loop is not None and push.get("push") == "check_transaction":
            self._loop.call_soon_threadsafe(self.front.transactions.check, push)

    def _push(self, connection: int, command: rm.RemotingCommand) -> None:
        conn = self.door.open.get(connection)
        if conn is not None:
            task = asyncio.create_task(self._write(conn, command))
            self._pushes.add(task)
            task.add_done_callback(self._pushes.discard)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        server = await asyncio.start_server(self._connection, self.config.host, self.config.port,
                                            reuse_address=True)
        host, port = self.config.address
        log.info("RocketMQ remoting front listening on %s:%d (NameServer and broker %s:%d)", self.config.host,
                 self.config.port, host, port)
        if self.door.max_connections < self.config.max_connections:
            log.warning("serving at most %d connections, not %d: the open files limit (ulimit -n) leaves no more",
                        self.door.max_connections, self.config.max_connections)
        registrar = registrar_for(self.rt.config, self.channel, self.front.namesrv.note_master)
        stopped = asyncio.Event()  # a stop makes ``stop_fd`` readable: the loop below ends at once
        self._loop.add_reader(self.rt.stop_fd, stopped.set)
        registering = None if registrar is None else asyncio.create_task(registrar.run(stopped))
        stats: dict[str, Any] = {}
        try:
            while not self.rt.stopping:
                # what moved is reported a stats interval later; while nothing moves the loop wakes only
                # for the NameServer table's scan and the idle report
                now_stats = self._stats(registrar)
                wait_ms = self.rt.config.broker.stats_interval_ms if now_stats != stats else IDLE_WAKE_MS
                wait_ms = self.rt.wait_ms(wait_ms)  # or less, while a report held back waits
                stats = now_stats
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopped.wait(), wait_ms / 1000)
                self.front.namesrv.scan()
                self.rt.report("running", **self._stats(registrar))
            self._loop.remove_reader(self.rt.stop_fd)
            if registering is not None:
                await registering  # it unregisters from the NameServers, each within its timeout
        finally:
            server.close()
            for conn in list(self.door.open.values()):
                conn.writer.close()
            await server.wait_closed()
            self.channel.close_loop_sockets()

    def _stats(self, registrar: Registrar | None) -> dict[str, Any]:
        return {"connections": len(self.door.open), "requests": self.requests, "bad_frames": self.bad_frames,
                "refused": self.door.refused, "evicted": self.door.evicted, "timed_out": self.timed_out,
                "read_bytes": self.door.reading_bytes, "acl_denied": self.front.acl_denied(),
                "registered": 0 if registrar is None else registrar.registered}

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername: Any = writer.get_extra_info("peername") or ("", 0)
        peer = Peer(next(self._ids), str(peername[0]), int(peername[1]))
        admitted, victim = self.door.admit(peer.ip, monotonic_ms())
        if not admitted:
            self._log_refusal(peer)
            writer.close()
            return
        if victim is not None:
            log.info("closing %s:%d (%s) to make room for %s", victim.peer.ip, victim.peer.port,
                     "idle" if victim.idle else "busy", peer.ip)
            self.door.leave(victim)
            victim.writer.transport.abort()
        conn = Connection(peer, writer, active_ms=monotonic_ms())
        self.door.enter(conn)
        try:
            while True:
                command = await self._read_command(reader, conn)
                if command is None:
                    break
                if command.is_response:
                    continue  # the front's one request, CHECK_TRANSACTION_STATE, is oneway: a response is stray
                self.requests += 1
                if self._busy(conn):
                    await self._write(conn, command.reply(rm.SYSTEM_BUSY, "too many requests in flight"))
                    continue
                self.inflight += 1
                task = asyncio.create_task(self._answer(command, conn))
                conn.tasks.add(task)
                task.add_done_callback(conn.tasks.discard)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            for task in conn.tasks:
                task.cancel()
            self.front.connection_closed(peer)
            self.door.leave(conn)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _busy(self, conn: Connection) -> bool:
        """Past its own limit, or past its share once the front's limit is reached (so the requests in
        flight stay under twice ``max_inflight``, and no connection's flood crowds out the others)."""
        held = len(conn.tasks)
        if held >= self.config.max_inflight_per_connection:
            return True
        return self.inflight >= self.config.max_inflight and held >= self.config.max_inflight // len(self.door.open)

    def _log_refusal(self, peer: Peer) -> None:
        now = monotonic_ms()
        if now - self._refusals_logged_ms >= REFUSAL_LOG_MS:
            self._refusals_logged_ms = now
            log.warning("refusing a connection from %s (%d refused so far): %d connections open, %d from that "
                        "address", peer.ip, self.door.refused, len(self.door.open), self.door.by_address[peer.ip])

    async def _read_command(self, reader: asyncio.StreamReader, conn: Connection) -> rm.RemotingCommand | None:
        """The next command, or None when the connection is done (closed, idle too long, a frame too
        slow or not to be trusted)."""
        peer = conn.peer
        while True:
            try:
                async with asyncio.timeout(self.config.idle_timeout_ms / 1000):
                    prefix = await reader.readexactly(4)  # cancelled, it consumes nothing
                break
            except TimeoutError:
                if conn.idle:  # a held pull is not idleness
                    self.timed_out += 1
                    log.info("closing %s:%d: idle for %d ms", peer.ip, peer.port, self.config.idle_timeout_ms)
                    return None
            except asyncio.IncompleteReadError:
                return None
        length = rm.frame_length(prefix)
        if not rm.MIN_FRAME_BYTES <= length <= self.config.max_frame_bytes:
            self.bad_frames += 1
            log.warning("closing %s:%d: frame length %d outside [%d, %d]", peer.ip, peer.port, length,
                        rm.MIN_FRAME_BYTES, self.config.max_frame_bytes)
            return None
        reserved = 0
        try:
            async with asyncio.timeout(self.config.frame_timeout_ms / 1000):
                if length > SMALL_FRAME_BYTES:  # a small frame is never held back: no wait to begin
                    reserved = await self.door.reserve(peer.ip, length)
                frame = await reader.readexactly(length)
        except TimeoutError:
            self.timed_out += 1
            log.warning("closing %s:%d: a frame of %d bytes did not arrive whole within %d ms", peer.ip, peer.port,
                        length, self.config.frame_timeout_ms)
            return None
        finally:
            self.door.release(peer.ip, reserved)
        conn.active_ms = monotonic_ms()
        try:
            return rm.decode_command(frame)
        except rm.FrameError as exc:
            self.bad_frames += 1
            log.warning("closing %s:%d: %s", peer.ip, peer.port, exc)
            return None

    async def _answer(self, command: rm.RemotingCommand, conn: Connection) -> None:
        try:
            try:
                reply = await self.front.handle(command, conn.peer)
            except Exception as exc:  # a bug: the client hears of it, the log has it, the connection stays
                log.exception("request code %d failed", command.code)
                reply = command.reply(rm.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            if not command.is_oneway:
                await self._write(conn, reply)
        finally:
            self.inflight -= 1

    async def _write(self, conn: Connection, command: rm.RemotingCommand) -> None:
        """One whole frame at a time; a client that does not read holds back only its own replies, and
        one that takes longer than ``frame_timeout_ms`` to take a reply is cut off. A frame the socket
        takes whole at once (nothing queued before it, nothing left after) needs no wait and no deadline."""
        frame = rm.encode_command(command)
        transport = conn.writer.transport
        if not conn.lock.locked() and not transport.get_write_buffer_size() and not transport.is_closing():
            conn.writer.write(frame)  # the transport sends at once what the socket takes
            if not transport.get_write_buffer_size():
                conn.active_ms = monotonic_ms()
                return
            frame = b""  # queued: wait for it below like any other
        try:
            async with asyncio.timeout(self.config.frame_timeout_ms / 1000), conn.lock:
                conn.writer.write(frame)  # nothing, when it is already queued
                await conn.writer.drain()
            conn.active_ms = monotonic_ms()
        except TimeoutError:
            self.timed_out += 1
            log.warning("closing %s:%d: a reply was not taken within %d ms", conn.peer.ip, conn.peer.port,
                        self.config.frame_timeout_ms)
            conn.writer.transport.abort()
        except ConnectionError:
            pass  # the client went away: its read loop cleans up
