"""One non-blocking TCP connection of the HA actor, either side: what was read, and what is still to
be written.

A transfer's body is a view of a mapped file: ``send_parts`` hands the header and the view to one
``sendmsg`` (no copy); only what the socket did not take is copied, so no view outlives the round.
"""

from __future__ import annotations

import socket

READ_BYTES = 1 << 20


class Peer:
    def __init__(self, sock: socket.socket, address: str, now_ms: int) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.fd = sock.fileno()
        self.address = address
        self.connected_ms = now_ms
        self.last_read_ms = now_ms
        self.pending_in = bytearray()  # the hello's bytes until whole
        self.out = bytearray()        # written, not yet taken by the socket
        self.read_bytes = 0

    @property
    def wants_write(self) -> bool:
        return bool(self.out)

    def read(self, now_ms: int) -> bytes | None:
        """What the socket holds (b"" when nothing); None once the peer closed it."""
        try:
            data = self.sock.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return b""
        if not data:
            return None
        self.last_read_ms = now_ms
        self.read_bytes += len(data)
        return data

    def send(self, data: bytes) -> bool:
        """Queue ``data`` and write what the socket takes; whether everything went."""
        self.out += data
        return self.flush()

    def send_parts(self, header: bytes, body: memoryview) -> bool:
        """A header and a body written together; the part the socket did not take is copied."""
        if self.out:
            self.out += header
            self.out += body
            return self.flush()
        try:
            sent = self.sock.sendmsg([header, body])
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent < len(header):
            self.out += header[sent:]
            self.out += body
        elif sent < len(header) + len(body):
            self.out += body[sent - len(header):]
        return not self.out

    def flush(self) -> bool:
        while self.out:
            try:
                sent = self.sock.send(self.out)
            except (BlockingIOError, InterruptedError):
                return False
            del self.out[:sent]
        return True

    def close(self) -> None:
        self.sock.close()
