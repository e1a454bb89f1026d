"""A real broker's remoting front whose writer stops answering (SIGSTOP): a RocketMQ client's send is
answered SYSTEM_BUSY once the front's call times out, never left hanging, and the connection serves
the sends after it once the writer runs again."""

from __future__ import annotations

import signal
from pathlib import Path

from mqstore.actors.remoting.front import CALL_TIMEOUT_MS
from mqstore.ipc.remoting import codec as rm
from tests.integration.broker import Broker, free_port_range

SEND_EXT = {"producerGroup": "G", "topic": "Frozen", "queueId": "0", "sysFlag": "0", "bornTimestamp": "0",
            "flag": "0", "properties": "", "reconsumeTimes": "0"}


def test_a_send_to_a_frozen_writer_is_answered_system_busy(tmp_path: Path) -> None:
    port = free_port_range(1)
    with Broker(tmp_path, remoting_port=port) as broker, \
            rm.RemotingClient("127.0.0.1", port, timeout_s=4 * CALL_TIMEOUT_MS / 1000) as client:
        assert client.call(rm.SEND_MESSAGE, SEND_EXT, b"before").code == rm.SUCCESS
        writer = broker.kill("writer", signal.SIGSTOP)
        try:
            busy = client.call(rm.SEND_MESSAGE, SEND_EXT, b"frozen")  # a socket timeout here is the hang
        finally:
            broker.kill("writer", signal.SIGCONT)
        assert (busy.code, busy.remark) == (rm.SYSTEM_BUSY, "the broker did not answer in time")
        assert broker.pid_of("writer") == writer  # the same writer, running again
        assert client.call(rm.SEND_MESSAGE, SEND_EXT, b"after").code == rm.SUCCESS
