"""The connections ZeroMQ closes on a bound socket, read from its monitor.

ZeroMQ closes a connection whose frame is over the socket's ``MAXMSGSIZE`` (``[broker]
max_request_bytes`` on the writer's ingress) without passing anything on, and one that fails its
handshake (a wrong CURVE key, a bad greeting) before a frame; the sender hears nothing and times
out. The socket monitor (``zmq.Socket.get_monitor_socket``, an inproc PAIR polled with the socket)
is the one place such a connection leaves a trace, so the actor that binds reads it and logs each:
a handshake failure as such, and a closed connection with the limit that may have closed it
(ZeroMQ's event does not tell a dropped frame from a client that hung up). Clients refuse a request
over the limit before it is sent (``mqstore.ipc.transport.exchange``), so a drop is a client that
does not ask, or is not ours.
"""

from __future__ import annotations

import logging
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

log = logging.getLogger("mqstore")

_HANDSHAKE_FAILED = (int(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL) | int(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)
                     | int(zmq.EVENT_HANDSHAKE_FAILED_AUTH))
EVENTS = int(zmq.EVENT_DISCONNECTED) | _HANDSHAKE_FAILED


class ClosedConnections:
    """A bound socket's monitor: ``monitor`` goes in the actor's poller, ``read`` when it is ready."""

    def __init__(self, sock: zmq.Socket[Any], name: str, max_msg_bytes: int) -> None:
        self.monitor: zmq.Socket[Any] = sock.get_monitor_socket(EVENTS)
        self.name = name
        self.max_msg_bytes = max_msg_bytes
        self.closed_count = 0
        self.failed_count = 0

    def read(self) -> None:
        """Log every event waiting, without blocking."""
        while True:
            try:
                event = parse_monitor_message(self.monitor.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                return
            kind = int(event["event"])
            if kind & _HANDSHAKE_FAILED:
                self.failed_count += 1
                log.warning("%s: a connection failed its handshake (%s, %s) and was closed", self.name,
                            zmq.Event(kind).name, event["value"])
            elif kind & int(zmq.EVENT_DISCONNECTED):
                self.closed_count += 1
                log.info("%s: a connection was closed (%d so far): its client hung up, or sent a frame over "
                         "%d bytes, which is dropped unread", self.name, self.closed_count, self.max_msg_bytes)

    def stats(self) -> dict[str, int]:
        return {"closed": self.closed_count, "handshake_failed": self.failed_count}
