"""The broker's registration with its NameServers, against real NameServers on loopback (the front's
own NameServer behind a listener here): registered with each at once, the topics as RocketMQ sends
them, a slave told its master, unregistered at a clean stop, and an unreachable NameServer logged once
per outage."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import pytest

from mqstore.actors.config import BrokerConfig, BrokerSection
from mqstore.actors.config_listeners import RemotingConfig
from mqstore.actors.remoting.headers import Peer
from mqstore.actors.remoting.namesrv import NameServer, local_identity
from mqstore.actors.remoting.registrar import Registrar, live_master_elsewhere, parse_namesrv, registered_topics
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.registration import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicQueues


def config(name: str, port: int, role: str = "ASYNC_MASTER", broker_id: int = 0) -> BrokerConfig:
    return BrokerConfig("/nonexistent", broker=BrokerSection(role=role, broker_id=broker_id),
                        remoting=RemotingConfig(port=port, broker_name=name))


@asynccontextmanager
async def serving(ns: NameServer) -> AsyncIterator[int]:
    """``ns`` answering REGISTER_BROKER and UNREGISTER_BROKER on a loopback port."""
    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = rm.decode_command(await reader.readexactly(rm.frame_length(await reader.readexactly(4))))
        handler = ns.register if request.code == rm.REGISTER_BROKER else ns.unregister
        writer.write(rm.encode_command(await handler(request, Peer(1, "127.0.0.1", 1))))
        await writer.drain()
        writer.close()
    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    async with server:
        yield int(server.sockets[0].getsockname()[1])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_namesrv_addresses_parse_and_a_bad_one_is_named() -> None:
    assert parse_namesrv("127.0.0.1:9876; 10.0.0.2:9877;") == [("127.0.0.1", 9876), ("10.0.0.2", 9877)]
    with pytest.raises(ValueError, match="nohost"):
        parse_namesrv("127.0.0.1:9876;nohost")


def test_a_master_registers_its_topics_and_an_inheritable_tbw102_while_a_slave_registers_read_only() -> None:
    master = registered_topics({"T": 4}, is_slave=False, auto_create=True, default_queues=8)
    assert master == {"T": TopicQueues("T", 4, 4, PERM_READ | PERM_WRITE),
                      "TBW102": TopicQueues("TBW102", 8, 8, PERM_INHERIT | PERM_READ | PERM_WRITE)}
    assert registered_topics({"T": 4}, is_slave=False, auto_create=False, default_queues=8) == {"T": master["T"]}
    assert registered_topics({"T": 4}, is_slave=True, auto_create=True, default_queues=8) == {
        "T": TopicQueues("T", 4, 4, PERM_READ)}


def test_registered_with_every_nameserver_a_slave_told_its_master_and_unregistered_at_stop() -> None:
    async def scenario() -> None:
        one, two = NameServer(config("a", 10911)), NameServer(config("x", 10913))
        async with serving(one) as port_one, serving(two) as port_two:
            async def topics() -> dict[str, TopicQueues]:
                return {"T": TopicQueues("T", 2, 2, PERM_READ)}
            slave = Registrar([("127.0.0.1", port_one), ("127.0.0.1", port_two)],
                              local_identity(config("a", 10915, "SLAVE", 1)), topics, interval_ms=60_000)
            stopped = asyncio.Event()
            told: list[str] = []
            slave.on_master = told.append
            task = asyncio.create_task(slave.run(stopped))
            while slave.registered < 2:
                await asyncio.sleep(0.01)
            for ns in (one, two):
                assert ns.table.live(ns.now_ms()).get("a", {}).get(1) is not None
            # the first NameServer is broker a's master's own front: it names the master
            assert (slave.master_addr, slave.master_ha_addr) == ("127.0.0.1:10911", "127.0.0.1:10912")
            assert told == ["127.0.0.1:10911"]
            route = two.route("T", None)  # x's front knows only the slave of a: its queues, read only
            assert route is not None and [q["perm"] for q in route["queueDatas"]] == [PERM_READ]
            stopped.set()  # within the 60 s interval: the task wakes for it, then unregisters
            await asyncio.wait_for(task, 10)
            assert two.table.live(two.now_ms()) == {}
            assert two.route("T", None) is None
    asyncio.run(scenario())


def test_an_unreachable_nameserver_is_logged_once_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async def topics() -> dict[str, TopicQueues]:
            return {}
        dead = ("127.0.0.1", closed_port())
        registrar = Registrar([dead], local_identity(config("b", 10911)), topics, interval_ms=1, timeout_ms=500)
        for _ in range(3):
            await registrar.register_all()
        assert registrar.registered == 0
    with caplog.at_level(logging.WARNING, logger="mqstore.remoting"):
        asyncio.run(scenario())
    assert len([r for r in caplog.records if "cannot register with" in r.getMessage()]) == 1


def test_a_master_is_refused_while_a_nameserver_lists_a_live_master_of_its_name_elsewhere() -> None:
    """Regression: an old master started again as a master after its slave was promoted served beside
    the promoted one, two masters of one broker name."""
    async def scenario() -> None:
        promoted = NameServer(config("a", 10911))  # the front of the promoted master of broker a

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            request = rm.decode_command(await reader.readexactly(rm.frame_length(await reader.readexactly(4))))
            writer.write(rm.encode_command(await promoted.cluster_info(request, Peer(1, "127.0.0.1", 1))))
            await writer.drain()
            writer.close()
        server = await asyncio.start_server(connection, "127.0.0.1", 0)
        async with server:
            port = int(server.sockets[0].getsockname()[1])
            listed = f"127.0.0.1:{closed_port()};127.0.0.1:{port}"  # one NameServer down, one answering

            def check(name: str, own_port: int, role: str = "ASYNC_MASTER", broker_id: int = 0) -> str | None:
                cfg = replace(config(name, own_port, role, broker_id), remoting=RemotingConfig(
                    port=own_port, broker_name=name, namesrv=listed))
                return live_master_elsewhere(cfg, timeout_s=3)
            refusal = await asyncio.to_thread(check, "a", 20911)
            assert refusal is not None and "live master of a at 127.0.0.1:10911" in refusal
            assert "--role SLAVE" in refusal and "--master" in refusal
            assert await asyncio.to_thread(check, "a", 10911) is None  # itself, back at its own address
            assert await asyncio.to_thread(check, "b", 20911) is None  # another broker name
            assert await asyncio.to_thread(check, "a", 20911, "SLAVE", 1) is None  # a slave follows, never refused
    asyncio.run(scenario())
