"""How the remoting front writes its replies: whole, at once when the socket takes them, and a client
that stops reading them is cut off once a reply has waited ``frame_timeout_ms``."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import pytest

from mqstore.ipc.client.api import Producer
from mqstore.ipc.remoting import codec as rm
from tests.integration.broker import Broker, free_port_range, wait_for


@pytest.mark.slow
def test_a_client_that_stops_reading_its_replies_is_cut_off_and_others_are_served(tmp_path: Path) -> None:
    port = free_port_range(1)
    broker = Broker(tmp_path, remoting_port=port, commitlog=4 * 1024 * 1024,
                    extra_toml="\n[remoting]\nframe_timeout_ms = 1000\n")
    with broker:
        with Producer(broker.store) as producer:
            sent = producer.send("Big", b"x" * (1024 * 1024))
        assert sent.ok
        view = rm.encode_command(rm.RemotingCommand(rm.VIEW_MESSAGE_BY_ID, 1, ext={"offset": str(sent.phys_offset)}))
        with socket.create_connection(("127.0.0.1", port)) as stalled:
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.sendall(view * 12)  # 12 MiB of replies, none read: more than the sockets between hold
            wait_for(lambda: "a reply was not taken within 1000 ms" in broker.logs(), 60, "the stalled client cut off")
            stalled.settimeout(30)
            received = 0
            with contextlib.suppress(ConnectionResetError):  # closed with requests unread: a reset
                while chunk := stalled.recv(1 << 20):  # what was already on its way, then the end
                    received += len(chunk)
        assert received < 12 * 1024 * 1024
        with rm.RemotingClient("127.0.0.1", port) as client:  # replies the socket takes at once come whole
            for _ in range(3):
                reply = client.call(rm.VIEW_MESSAGE_BY_ID, {"offset": sent.phys_offset})
                assert reply.code == rm.SUCCESS and len(reply.body) > 1024 * 1024
            assert client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "Big"}).code == rm.SUCCESS
