"""A front whose writer and readers are gone (nothing bound at their endpoints) answers a stock client's
send and pull with SYSTEM_BUSY once the call's timeout passes, on the event loop's own sockets,
rather than leaving the request unanswered."""

from __future__ import annotations

import asyncio
from contextlib import closing
from pathlib import Path

import pytest

from mqstore.actors.config import BrokerConfig
from mqstore.actors.remoting import front as front_module
from mqstore.actors.remoting.front import BrokerFront
from mqstore.actors.remoting.headers import Peer
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.transport.channel import Channel

PEER = Peer(1, "127.0.0.1", 5000)
HANG_GUARD_S = 60  # a request still unanswered by then hangs: the test fails rather than waiting on


def gone_channel(tmp_path: Path) -> Channel:
    return Channel({route: [f"ipc://{tmp_path}/{route}"] for route in ("ingress", "transactions", "reader0")})


@pytest.mark.parametrize("command", [
    rm.RemotingCommand(rm.SEND_MESSAGE, 7, 0, None, {"topic": "T", "queueId": "0"}, b"body"),
    rm.RemotingCommand(rm.SEND_MESSAGE_V2, 8, 0, None, {"b": "T", "e": "0"}, b"body"),
    rm.RemotingCommand(rm.PULL_MESSAGE, 9, 0, None, {"consumerGroup": "G", "topic": "T", "queueId": "0",
                                                     "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0"}),
], ids=["send", "send_v2", "pull"])
def test_a_request_to_a_gone_actor_is_answered_system_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           command: rm.RemotingCommand) -> None:
    monkeypatch.setattr(front_module, "CALL_TIMEOUT_MS", 200)
    monkeypatch.setattr(BrokerFront._call, "__defaults__", (200,))

    async def main(front: BrokerFront) -> rm.RemotingCommand:
        return await asyncio.wait_for(front.handle(command, PEER), HANG_GUARD_S)

    with closing(gone_channel(tmp_path)) as channel:
        answer = asyncio.run(main(BrokerFront(BrokerConfig(str(tmp_path)), channel)))
    assert (answer.code, answer.opaque) == (rm.SYSTEM_BUSY, command.opaque)
    assert answer.remark == "the broker did not answer in time"
