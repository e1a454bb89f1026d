"""The broker's registration with its NameServers (RocketMQ's BrokerOuterAPI.registerBrokerAll).

With ``[remoting] namesrv`` set ("HOST:PORT;HOST:PORT"), the front registers its broker with every
NameServer listed at start and every ``register_interval_ms``, with all of them at once, each call
bounded by a timeout, and unregisters from all of them at a clean stop. A registration carries the
broker's cluster, name, id, address and HA address, and its topics: a master's as its writer has
them (with ``TBW102`` marked inheritable when topics are made on first send, so NameServers route
new topics to it), a slave's from its topics file. A NameServer that cannot be reached is logged
once when the outage starts and once when it ends. The list may name the broker's own front.

What a slave's registration is answered with (its master's address and HA address) is kept in
``master_addr`` and ``master_ha_addr``.

Before a master starts, ``live_master_elsewhere`` asks each NameServer listed whether a live master
of its broker name already serves at another address (a slave promoted while this one was down):
never two masters serving one broker name.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable

from mqstore.actors.clock import wall_ms
from mqstore.actors.config import BrokerConfig
from mqstore.actors.config_ha import HaSettingError, split_host_port
from mqstore.actors.remoting.namesrv import local_identity
from mqstore.engine.meta.topics import TopicTable
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.registration import (
    MASTER_ID,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    BrokerRegistration,
    TopicQueues,
    encode_register,
)
from mqstore.ipc.transport.channel import Channel
from mqstore.ipc.wire import replies, requests

log = logging.getLogger("mqstore.remoting")

DEFAULT_TOPIC = "TBW102"
CALL_TIMEOUT_MS = 3_000  # one NameServer's answer (RocketMQ waits 24 s; a front answers at once)


def parse_namesrv(text: str) -> list[tuple[str, int]]:
    """``"HOST:PORT;HOST:PORT"`` as addresses; ValueError naming the bad one."""
    try:
        return [split_host_port(part.strip(), "remoting.namesrv") for part in text.split(";") if part.strip()]
    except HaSettingError as exc:
        raise ValueError(str(exc)) from None


async def call(host: str, port: int, command: rm.RemotingCommand, timeout_ms: int) -> rm.RemotingCommand:
    """One request on a connection of its own; its response (TimeoutError, OSError, FrameError)."""
    async with asyncio.timeout(timeout_ms / 1000):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(rm.encode_command(command))
            await writer.drain()
            while True:
                length = rm.frame_length(await reader.readexactly(4))
                reply = rm.decode_command(await reader.readexactly(length))
                if reply.is_response and reply.opaque == command.opaque:
                    return reply
        finally:
            writer.close()


def registrar_for(config: BrokerConfig, channel: Channel, on_master: Callable[[str], None]) -> Registrar | None:
    """The front's registrar (None without ``[remoting] namesrv``): a master's topics from its writer,
    a slave's from its topics file."""
    remoting = config.remoting
    if not remoting.namesrv:
        return None
    broker = config.broker

    async def topics() -> dict[str, int]:
        if config.is_slave:
            return {t.name: t.queue_count for t in TopicTable.load(config.store_dir, wall_ms).topics.values()}
        reply = await asyncio.wrap_future(channel.call("ingress", requests.Topics(), timeout_ms=CALL_TIMEOUT_MS))
        return replies.TopicsReply.decode(reply).topics

    async def registered() -> dict[str, TopicQueues]:
        return registered_topics(await topics(), is_slave=config.is_slave, auto_create=broker.auto_create_topics,
                                 default_queues=broker.default_queues)
    return Registrar(parse_namesrv(remoting.namesrv), local_identity(config), registered,
                     interval_ms=remoting.register_interval_ms, on_master=on_master)


class Registrar:
    """Registers ``identity`` (its topics from ``topics``) with every NameServer in ``namesrv``."""

    def __init__(self, namesrv: list[tuple[str, int]], identity: BrokerRegistration,
                 topics: Callable[[], Awaitable[dict[str, TopicQueues]]], *, interval_ms: int,
                 timeout_ms: int = CALL_TIMEOUT_MS, heartbeat_timeout_ms: int | None = None,
                 on_master: Callable[[str], None] = lambda addr: None) -> None:
        self.namesrv = namesrv
        self.identity = identity
        self.topics = topics
        self.on_master = on_master
        self.interval_ms = interval_ms
        self.timeout_ms = timeout_ms
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self._opaques = itertools.count(1)
        self._failing: set[tuple[str, int]] = set()
        self._counter = 0
        self.master_addr = ""
        self.master_ha_addr = ""
        self.registered = 0  # successful registrations, all NameServers together

    async def run(self, stopped: asyncio.Event) -> None:
        """Register now and every interval until ``stopped`` is set; then unregister. Between two
        rounds the task sleeps on ``stopped`` (it looked at a stop flag every 100 ms)."""
        loop = asyncio.get_running_loop()
        try:
            while not stopped.is_set():
                started = loop.time()
                await self.register_all()
                left_s = self.interval_ms / 1000 - (loop.time() - started)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopped.wait(), max(left_s, 0))
        finally:
            if stopped.is_set():
                await self.unregister_all()

    async def register_all(self) -> None:
        try:
            topics = await self.topics()
        except Exception as exc:  # the writer busy or restarting: the next round tries again
            log.warning("not registering with the NameServers this round: the broker's topics: %s", exc)
            return
        self._counter += 1
        registration = BrokerRegistration(self.identity.key, self.identity.ha_addr, topics,
                                          {"stateVersion": 0, "timestamp": wall_ms(), "counter": self._counter},
                                          self.heartbeat_timeout_ms)
        ext, body = encode_register(registration)
        answered = await asyncio.gather(*(self._call(addr, rm.REGISTER_BROKER, ext, body) for addr in self.namesrv))
        answers = [r for r in answered if r is not None and r.code == rm.SUCCESS]
        if answers and self.identity.key.broker_id != 0:
            told = next((r for r in answers if r.ext.get("masterAddr")), answers[0])
            self.master_addr = told.ext.get("masterAddr", "")
            self.master_ha_addr = told.ext.get("haServerAddr", "")
            self.on_master(self.master_addr)

    async def unregister_all(self) -> None:
        key = self.identity.key
        ext = {"brokerName": key.broker_name, "brokerAddr": key.broker_addr, "clusterName": key.cluster,
               "brokerId": str(key.broker_id)}
        await asyncio.gather(*(self._call(addr, rm.UNREGISTER_BROKER, ext, b"") for addr in self.namesrv))

    async def _call(self, addr: tuple[str, int], code: int, ext: dict[str, str],
                    body: bytes) -> rm.RemotingCommand | None:
        command = rm.RemotingCommand(code, next(self._opaques), 0, None, ext, body, "JAVA")
        what = "register with" if code == rm.REGISTER_BROKER else "unregister from"
        try:
            reply = await call(addr[0], addr[1], command, self.timeout_ms)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, rm.FrameError) as exc:
            self._failed(addr, f"cannot {what} the NameServer {addr[0]}:{addr[1]}: {type(exc).__name__} {exc}")
            return None
        if reply.code != rm.SUCCESS:
            self._failed(addr, f"the NameServer {addr[0]}:{addr[1]} refused to {what.split()[0]} this broker: "
                               f"code {reply.code}, {reply.remark}")
            return reply
        if addr in self._failing:
            self._failing.discard(addr)
            log.info("registered with the NameServer %s:%d again", *addr)
        if code == rm.REGISTER_BROKER:
            self.registered += 1
        return reply

    def _failed(self, addr: tuple[str, int], message: str) -> None:
        if addr not in self._failing:  # once per outage
            self._failing.add(addr)
            log.warning("%s (logged once until it answers again)", message)


def registered_topics(topics: dict[str, int], *, is_slave: bool, auto_create: bool,
                      default_queues: int) -> dict[str, TopicQueues]:
    """A broker's topics as it registers them (a slave's read only), with the inheritable ``TBW102``
    of a master that makes topics on first send."""
    perm = PERM_READ if is_slave else PERM_READ | PERM_WRITE
    table = {name: TopicQueues(name, count, count, perm) for name, count in topics.items()}
    if auto_create and not is_slave:
        table[DEFAULT_TOPIC] = TopicQueues(DEFAULT_TOPIC, default_queues, default_queues,
                                           PERM_INHERIT | PERM_READ | PERM_WRITE)
    return table


def live_master_elsewhere(config: BrokerConfig, timeout_s: float = CALL_TIMEOUT_MS / 1000) -> str | None:
    """Why this master must not start: a NameServer of ``[remoting] namesrv`` lists a live master
    (id 0) of its broker name at another address; None when none does or none answers (a master
    alone, or its NameServers all down, starts as before)."""
    if config.is_slave or not config.remoting.namesrv:
        return None
    own = local_identity(config).key
    for host, port in parse_namesrv(config.remoting.namesrv):
        try:
            with rm.RemotingClient(host, port, timeout_s=timeout_s) as client:
                reply = client.call(rm.GET_BROKER_CLUSTER_INFO)
            info = json.loads(reply.body) if reply.code == rm.SUCCESS else {}
            addrs = info.get("brokerAddrTable", {}).get(own.broker_name, {}).get("brokerAddrs", {})
        except (OSError, ValueError, AttributeError, rm.FrameError):
            continue  # a NameServer down (or this broker's own front, not started yet) proves nothing
        master = addrs.get(str(MASTER_ID)) if isinstance(addrs, dict) else None
        if master and master != own.broker_addr:
            return (f"the NameServer {host}:{port} lists a live master of {own.broker_name} at {master}; two "
                    f"masters must never serve one broker name. Start this store as its slave instead: "
                    f"mqstore start --store {config.store_dir} --role SLAVE --broker-id N (1 or more, unused) "
                    f"--master HOST:HA_PORT (that master's HA port, its remoting port + 1 unless set): its log "
                    "is cut back to the point the two agree on and then follows")
    return None
