"""What a broker's role changes in the front's answers: a slave refuses sends as a RocketMQ slave does
and ends no transaction; every pull answer's ``suggestWhichBrokerId`` follows PullMessageProcessor's
rule on a master and on a slave."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mqstore.actors.config import BrokerConfig, BrokerSection
from mqstore.actors.remoting.front import BrokerFront
from mqstore.actors.remoting.headers import Peer
from mqstore.actors.remoting.roles import REJECT_REMARK, LastFileBase, PullAdvice, last_phys_offset
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import encode_record
from mqstore.ipc.remoting import codec as rm

PEER = Peer(1, "127.0.0.1", 5000)
HOST = Host("127.0.0.1", 10911)


class Unreachable:
    """A channel the test expects never to be used."""

    async def request_on_loop(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError(f"the front asked the broker: {args}")


def front(tmp_path: Path, role: str, broker_id: int) -> BrokerFront:
    config = BrokerConfig(str(tmp_path), broker=BrokerSection(role=role, broker_id=broker_id))
    return BrokerFront(config, Unreachable())  # type: ignore[arg-type]


@pytest.mark.parametrize("code", [rm.SEND_MESSAGE, rm.SEND_MESSAGE_V2, rm.SEND_BATCH_MESSAGE])
def test_a_slave_refuses_every_send_as_a_rocketmq_slave_does(tmp_path: Path, code: int) -> None:
    send = rm.RemotingCommand(code, 3, 0, None, {"topic": "T", "b": "T", "queueId": "0", "e": "0"}, b"body")
    answer = asyncio.run(front(tmp_path, "SLAVE", 1).handle(send, PEER))
    assert (answer.code, answer.remark, answer.opaque) == (rm.SYSTEM_BUSY, REJECT_REMARK, 3)


def test_a_slave_ends_no_transaction(tmp_path: Path) -> None:
    end = rm.RemotingCommand(rm.END_TRANSACTION, 4, 0, None, {"producerGroup": "G", "commitLogOffset": "0"})
    assert asyncio.run(front(tmp_path, "SLAVE", 1).handle(end, PEER)).code == rm.SLAVE_NOT_AVAILABLE


def test_a_master_sends_its_sends_to_the_writer(tmp_path: Path) -> None:
    send = rm.RemotingCommand(rm.SEND_MESSAGE, 3, 0, None, {"topic": "T", "queueId": "0"}, b"body")
    with pytest.raises(AssertionError, match="the front asked the broker"):
        asyncio.run(front(tmp_path, "ASYNC_MASTER", 0).handle(send, PEER))


def records(*phys_offsets: int) -> bytes:
    return b"".join(bytes(encode_record(topic="T", body=b"x" * 10, properties={}, born_host=HOST, store_host=HOST,
                                        phys_offset=p)) for p in phys_offsets)


def pulled(code: int = rm.SUCCESS, body: bytes = b"") -> rm.RemotingCommand:
    return rm.RemotingCommand(rm.PULL_MESSAGE, 9).reply(code, None, {"suggestWhichBrokerId": "0"}, body)


def advice(*, is_slave: bool, master: bool = True, slave: bool = True, end: int = 10_000) -> PullAdvice:
    return PullAdvice(1 if is_slave else 0, is_slave=is_slave, master_live=lambda: master, slave_live=lambda: slave,
                      log_end=lambda: end, far_behind=1_000)


def test_the_last_records_physical_offset_is_read_from_the_pull_body() -> None:
    assert last_phys_offset(records(100, 250, 4096)) == 4096
    assert last_phys_offset(b"") is None
    assert last_phys_offset(records(7)[:20]) is None


def test_a_master_suggests_its_slave_only_to_a_pull_far_behind_while_a_slave_is_registered() -> None:
    suggest = "suggestWhichBrokerId"
    assert advice(is_slave=False).advise(pulled(body=records(9_500))).ext[suggest] == "0"
    assert advice(is_slave=False).advise(pulled(body=records(100, 8_000))).ext[suggest] == "1"
    assert advice(is_slave=False, slave=False).advise(pulled(body=records(8_000))).ext[suggest] == "0"
    assert advice(is_slave=False).advise(pulled(rm.PULL_NOT_FOUND)).ext[suggest] == "0"


def test_a_slave_sends_a_consumer_to_its_live_master_and_keeps_it_otherwise() -> None:
    suggest = "suggestWhichBrokerId"
    found = advice(is_slave=True).advise(pulled(body=records(9_500)))
    assert (found.code, found.ext[suggest]) == (rm.SUCCESS, "0")
    empty = advice(is_slave=True).advise(pulled(rm.PULL_NOT_FOUND))
    assert (empty.code, empty.ext[suggest]) == (rm.PULL_RETRY_IMMEDIATELY, "0")  # ask the master at once
    slow = advice(is_slave=True).advise(pulled(body=records(8_000)))
    assert (slow.code, slow.ext[suggest]) == (rm.SUCCESS, "1")  # far behind: stay on the slave
    alone = advice(is_slave=True, master=False).advise(pulled(rm.PULL_NOT_FOUND))
    assert (alone.code, alone.ext[suggest]) == (rm.PULL_NOT_FOUND, "1")  # no master: the slave serves


def test_the_commitlogs_last_file_gives_the_logs_end_from_below(tmp_path: Path) -> None:
    (tmp_path / "commitlog").mkdir()
    assert LastFileBase(tmp_path)() == 0
    for base in (0, 1 << 30, 2 << 30):
        (tmp_path / "commitlog" / f"{base:020d}").touch()
    assert LastFileBase(tmp_path)() == 2 << 30
