"""The master's HA port holds a bounded number of connections, each for a bounded time before its
handshake: real loopback sockets against ``MasterSide``, the clock passed in."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import cast

import pytest

from mqstore.actors.config_ha import HaConfig
from mqstore.actors.ha.log_source import LogSource
from mqstore.actors.ha.master import HANDSHAKE_TIMEOUT_MS, MasterSide
from mqstore.engine.ha.epochs import EpochEntry
from mqstore.ipc.wire import ha as wire


@pytest.fixture
def side() -> Iterator[MasterSide]:
    master = MasterSide(HaConfig(max_connections=3), cast(LogSource, None), (EpochEntry(1, 0),), 0)
    master.listen(("127.0.0.1", 0))
    yield master
    master.close()


def _dial(side: MasterSide, count: int) -> list[socket.socket]:
    assert side.listener is not None
    return [socket.create_connection(side.listener.getsockname(), timeout=10) for _ in range(count)]


def _closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_flood_of_connections_past_max_connections_is_refused_and_the_slave_keeps_its_place(
        side: MasterSide) -> None:
    side.written_end = 0
    clients = _dial(side, 5)
    try:
        accepted = []
        while len(accepted) + side.refused < 5:  # the kernel has them queued: accept() drains the queue
            accepted += side.accept(0)
        assert len(side.links) == 3 and side.refused == 2
        assert sum(_closed_by_peer(c) for c in clients[3:]) == 2
        slave = accepted[0]
        clients[0].sendall(wire.SlaveHandshake(1).encode())
        side.on_readable(slave, 10)
        assert slave.copy is not None  # past its handshake: a full port does not touch it
    finally:
        for c in clients:
            c.close()


def test_a_peer_that_trickles_its_handshake_is_closed_after_the_handshake_timeout(side: MasterSide) -> None:
    side.written_end = 0
    clients = _dial(side, 2)
    try:
        links = []
        while len(links) < 2:
            links += side.accept(0)
        clients[0].sendall(wire.SlaveHandshake(1).encode())
        side.on_readable(links[0], 10)
        assert links[0].copy is not None
        trickler = clients[1]
        handshake = wire.SlaveHandshake(2).encode()
        for i, now in enumerate(range(1000, HANDSHAKE_TIMEOUT_MS + 1001, 1000)):  # a byte a second: never idle
            trickler.sendall(handshake[i:i + 1])
            side.on_readable(links[1], now)
            side.housekeep(now)
        assert links[1].peer.fd not in side.links and _closed_by_peer(trickler)
        assert links[0].peer.fd in side.links  # the slave past its handshake stays
    finally:
        for c in clients:
            c.close()
