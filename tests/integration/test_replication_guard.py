"""The master's HA port against peers that misbehave, on raw sockets: a report beyond the master's
end closes that connection (RocketMQ's #3015), a second connection with a connected broker id is
refused while the first is kept, and a peer without the secret gets nothing of the log."""

from __future__ import annotations

import socket
from pathlib import Path

from mqstore.ipc.client.api import Producer
from mqstore.ipc.wire import ha as wire
from mqstore.ipc.wire import ha_hello as hello
from tests.integration.broker import Broker, free_port_range, wait_for

SECRET = "a-secret-of-sixteen-chars"


def handshake(port: int, broker_id: int) -> tuple[socket.socket, wire.MasterHandshake]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(wire.SlaveHandshake(broker_id).encode())
    stream = wire.MasterStream()
    while True:
        data = sock.recv(1 << 16)
        assert data, "the master closed the connection instead of answering the handshake"
        frames = stream.feed(data)
        if frames:
            assert isinstance(frames[0], wire.MasterHandshake)
            return sock, frames[0]


def closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        while sock.recv(1 << 16):
            continue
    except ConnectionResetError:
        pass
    return True


def test_forged_reports_and_duplicate_ids_are_refused(tmp_path: Path) -> None:
    port = free_port_range(1)
    with Broker(tmp_path, extra_toml=f"\n[ha]\nserve = true\nlisten_port = {port}\n") as master:
        with Producer(master.store) as producer:
            assert producer.send("T", b"x" * 100).ok
        first, shake = wait_for(lambda: _try(port, 5), 30, "the master to answer a handshake")
        assert shake.last_epoch == 1 and shake.entries[0].epoch == 1
        second = socket.create_connection(("127.0.0.1", port), timeout=10)
        second.sendall(wire.SlaveHandshake(5).encode())
        assert closed(second)  # the same broker id: refused
        first.sendall(wire.SlaveReport(shake.max_offset).encode())
        first.settimeout(10)
        assert first.recv(wire.TRANSFER_HEADER_SIZE)  # the first connection is kept and served
        forged, shake = handshake(port, 6)
        forged.sendall(wire.SlaveReport(shake.max_offset + 1_000_000).encode())
        assert closed(forged)
        assert "beyond the master's end" in master.logs()
        assert "is connected already" in master.logs()
        first.close()


def _try(port: int, broker_id: int) -> tuple[socket.socket, wire.MasterHandshake] | None:
    try:
        return handshake(port, broker_id)
    except (OSError, AssertionError):
        return None


def test_a_peer_without_the_secret_gets_nothing(tmp_path: Path) -> None:
    port = free_port_range(1)
    with Broker(tmp_path, extra_toml=f'\n[ha]\nserve = true\nlisten_port = {port}\nsecret = "{SECRET}"\n'):
        sock = wait_for(lambda: _dial(port), 30, "the HA port")
        challenge = sock.recv(hello.CHALLENGE_SIZE)
        nonce = hello.decode_challenge(challenge)
        sock.sendall(hello.encode_answer(b"not-the-secret-at-all", nonce, hello.new_nonce(), 1))
        sock.sendall(wire.SlaveHandshake(1).encode())
        received = b""
        sock.settimeout(10)
        try:
            while chunk := sock.recv(1 << 16):
                received += chunk
        except ConnectionResetError:
            pass
        assert received == b""  # no proof, no handshake, no byte of the log


def _dial(port: int) -> socket.socket | None:
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        return None


def test_a_slave_pointed_at_a_port_that_is_no_master_says_so_and_keeps_running(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        slave = Broker(tmp_path)
        slave.start_args += ("--role", "SLAVE", "--broker-id", "1", "--master", f"127.0.0.1:{silent.getsockname()[1]}")
        with slave:
            wait_for(lambda: "is it the HA port of an mqstore master?" in slave.logs(), 30, "the slave's log line")
            status = slave.status()
            assert status is not None and status["actors"]["ha"]["state"] == "running"
            assert status["actors"]["ha"]["ha_state"] == "connecting"
