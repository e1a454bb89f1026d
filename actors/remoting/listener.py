"""The remoting front's listener: the ``remoting`` actor process, one asyncio TCP listener on which
stock RocketMQ clients speak RocketMQ's remoting protocol.

It serves both the NameServer requests and the broker requests (their codes do not collide;
clients keep one connection per address anyway). Each connection reads whole frames and serves each
request in its own task, since a held pull must never block the requests behind it on the same
socket; replies are written one whole frame at a time. What a request is answered with is
``mqstore.actors.remoting.front.BrokerFront``'s business; who is consuming is ``mqstore.actors.remoting.clients``'.

A frame that lies about its length, exceeds ``max_frame_bytes`` or has a header that is not a
command closes that connection with a log line; other clients never notice. Past
``max_inflight_per_connection`` requests a client gets SYSTEM_BUSY, past ``max_connections`` new
connections are closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import Any

from mqstore.actors.remoting.front import BrokerFront
from mqstore.actors.remoting.headers import Peer
from mqstore.actors.runtime import Runtime
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.transport.channel import Channel

log = logging.getLogger("mqstore.remoting")

STOP_POLL_S = 0.1


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
        self._writers: set[asyncio.StreamWriter] = set()
        self._connections: dict[int, tuple[asyncio.StreamWriter, asyncio.Lock]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pushes: set[asyncio.Task[None]] = set()
        self.requests = 0
        self.bad_frames = 0

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        finally:
            self.channel.close()

    def _on_push(self, route: str, push: dict[str, Any]) -> None:
        """A transaction check from the actor, on the channel's thread: the event loop sends it."""
        if self._loop is not None and push.get("push") == "check_transaction":
            self._loop.call_soon_threadsafe(self.front.transactions.check, push)

    def _push(self, connection: int, command: rm.RemotingCommand) -> None:
        entry = self._connections.get(connection)
        if entry is not None:
            task = asyncio.create_task(_write_quietly(*entry, command))
            self._pushes.add(task)
            task.add_done_callback(self._pushes.discard)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        server = await asyncio.start_server(self._connection, self.config.host, self.config.port,
                                            reuse_address=True)
        host, port = self.config.address
        log.info("RocketMQ remoting front listening on %s:%d (NameServer and broker %s:%d)", self.config.host,
                 self.config.port, host, port)
        try:
            while not self.rt.stopping:
                await asyncio.sleep(STOP_POLL_S)
                self.rt.report("running", connections=len(self._writers), requests=self.requests,
                               bad_frames=self.bad_frames, acl_denied=self.front.acl_denied())
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername: Any = writer.get_extra_info("peername") or ("", 0)
        if len(self._writers) >= self.config.max_connections:
            log.warning("refusing a connection from %s: %d connections open", peername, len(self._writers))
            writer.close()
            return
        peer = Peer(next(self._ids), str(peername[0]), int(peername[1]))
        self._writers.add(writer)
        tasks: set[asyncio.Task[None]] = set()
        lock = asyncio.Lock()
        self._connections[peer.connection] = (writer, lock)
        try:
            while True:
                command = await self._read_command(reader, peer)
                if command is None:
                    break
                if command.is_response:
                    continue  # the front's one request, CHECK_TRANSACTION_STATE, is oneway: a response is stray
                self.requests += 1
                if len(tasks) >= self.config.max_inflight_per_connection:
                    await _write(writer, lock, command.reply(rm.SYSTEM_BUSY, "too many requests in flight"))
                    continue
                task = asyncio.create_task(self._answer(command, peer, writer, lock))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            for task in tasks:
                task.cancel()
            self.front.connection_closed(peer)
            self._connections.pop(peer.connection, None)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _read_command(self, reader: asyncio.StreamReader, peer: Peer) -> rm.RemotingCommand | None:
        """The next command, or None when the connection is done (closed, or a frame not to be trusted)."""
        try:
            length = rm.frame_length(await reader.readexactly(4))
        except asyncio.IncompleteReadError:
            return None
        if not rm.MIN_FRAME_BYTES <= length <= self.config.max_frame_bytes:
            self.bad_frames += 1
            log.warning("closing %s:%d: frame length %d outside [%d, %d]", peer.ip, peer.port, length,
                        rm.MIN_FRAME_BYTES, self.config.max_frame_bytes)
            return None
        try:
            return rm.decode_command(await reader.readexactly(length))
        except rm.FrameError as exc:
            self.bad_frames += 1
            log.warning("closing %s:%d: %s", peer.ip, peer.port, exc)
            return None

    async def _answer(self, command: rm.RemotingCommand, peer: Peer, writer: asyncio.StreamWriter,
                      lock: asyncio.Lock) -> None:
        try:
            reply = await self.front.handle(command, peer)
        except Exception as exc:  # a bug: the client hears of it, the log has it, the connection stays
            log.exception("request code %d failed", command.code)
            reply = command.reply(rm.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if not command.is_oneway:
            with contextlib.suppress(ConnectionError):
                await _write(writer, lock, reply)


async def _write_quietly(writer: asyncio.StreamWriter, lock: asyncio.Lock, command: rm.RemotingCommand) -> None:
    with contextlib.suppress(ConnectionError):
        await _write(writer, lock, command)


async def _write(writer: asyncio.StreamWriter, lock: asyncio.Lock, command: rm.RemotingCommand) -> None:
    # one frame at a time, and a client that does not read holds back only its own replies
    async with lock:
        writer.write(rm.encode_command(command))
        await writer.drain()
