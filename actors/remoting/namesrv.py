"""The front's NameServer: REGISTER_BROKER, UNREGISTER_BROKER, GET_BROKER_CLUSTER_INFO and the routes.

Every broker's front is a NameServer for itself and for every broker that registers with it
(``mqstore.actors.remoting.brokers.BrokerTable``). The broker the front serves takes part in every
answer as ``local``: its own role and broker id, name and cluster, with the topic being routed as the
front's writer has it, so a lone broker routes exactly as before and a cluster adds to it.

Answers follow RocketMQ's NameServer (DefaultRequestProcessor): a registration is answered SUCCESS
with ``masterAddr`` and ``haServerAddr`` of its broker name's live master when a slave registers (a
master's answer has neither), a body that is RocketMQ's KVTable of order topics (empty here), and
SYSTEM_ERROR "crc32 not match" for a body its ``bodyCrc32`` does not match; an unregistration is
answered SUCCESS whether or not the broker was known.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.config import BrokerConfig
from mqstore.actors.remoting.brokers import BrokerTable, Master
from mqstore.actors.remoting.headers import Peer
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.registration import (
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    BrokerKey,
    BrokerRegistration,
    RegistrationError,
    TopicQueues,
    decode_key,
    decode_register,
)

log = logging.getLogger("mqstore.remoting")

SCAN_INTERVAL_MS = 5_000  # scanNotActiveBroker's period


def local_identity(config: BrokerConfig) -> BrokerRegistration:
    """The broker this front serves, without topics: its cluster, name, id, address and HA address."""
    remoting = config.remoting
    host, port = remoting.address
    ha_host, ha_port = config.ha_address
    if ha_host in ("", "0.0.0.0"):
        ha_host = host
    return BrokerRegistration(BrokerKey(remoting.cluster_name, remoting.broker_name, f"{host}:{port}",
                                        config.broker.broker_id), f"{ha_host}:{ha_port}")


class NameServer:
    """The broker table behind the front's NameServer requests; ``now_ms`` is the clock (injectable)."""

    def __init__(self, config: BrokerConfig, now_ms: Callable[[], int] = monotonic_ms) -> None:
        self.table = BrokerTable(config.remoting.broker_expire_ms)
        self.identity = local_identity(config)
        self.is_slave = config.is_slave
        self.now_ms = now_ms
        self._scanned_ms = now_ms()
        self._told_master: tuple[str, int] | None = None

    def local(self, queues: int | None = None, topic: str = "") -> BrokerRegistration:
        """This broker, holding ``topic`` with ``queues`` queues when given (a slave's are read only)."""
        if queues is None:
            return self.identity
        perm = PERM_READ if self.is_slave else PERM_READ | PERM_WRITE
        topics = {topic: TopicQueues(topic, queues, queues, perm)}
        return BrokerRegistration(self.identity.key, self.identity.ha_addr, topics)

    async def register(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        try:
            registration = decode_register(request.ext, request.body)
        except RegistrationError as exc:
            return request.reply(rm.SYSTEM_ERROR, str(exc))
        now = self.now_ms()
        key = registration.key
        known = any(key.broker_addr == r.key.broker_addr
                    for r in self.table.live(now).get(key.broker_name, {}).values())
        self.table.register(registration, now)
        if not known:
            log.info("broker %s (id %d, cluster %s) at %s registered, %d topics", key.broker_name, key.broker_id,
                     key.cluster, key.broker_addr, len(registration.topics))
        ext: dict[str, str] = {}
        master = self.master(key.broker_name) if key.broker_id != MASTER_ID else None
        if master is not None:
            ext = {"masterAddr": master.addr, "haServerAddr": master.ha_addr}
        return request.reply(rm.SUCCESS, None, ext, b'{"table":{}}')

    async def unregister(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        try:
            key = decode_key(request.ext)
        except RegistrationError as exc:
            return request.reply(rm.SYSTEM_ERROR, str(exc))
        if self.table.unregister(key):
            log.info("broker %s (id %d) at %s unregistered", key.broker_name, key.broker_id, key.broker_addr)
        return request.reply(rm.SUCCESS)

    async def cluster_info(self, request: rm.RemotingCommand, peer: Peer) -> rm.RemotingCommand:
        body = self.table.cluster_info(self.now_ms(), self.identity)
        return request.reply(rm.SUCCESS, body=json.dumps(body, separators=(",", ":")).encode())

    def route(self, topic: str, queues: int | None) -> dict[str, Any] | None:
        """The topic's route; ``queues``: this broker's queues of it (None: this broker does not route it)."""
        return self.table.route(topic, self.now_ms(), self.local(queues, topic))

    def master(self, broker_name: str) -> Master | None:
        return self.table.master(broker_name, self.now_ms(), self.identity)

    def note_master(self, addr: str) -> None:
        """What a NameServer answered this broker's registration with: its master's address ("" none)."""
        self._told_master = (addr, self.now_ms()) if addr else None

    def master_live(self) -> bool:
        """Whether this broker's master is live: registered here, or named by a NameServer's answer
        within the expiry."""
        if self.master(self.identity.key.broker_name) is not None:
            return True
        told = self._told_master
        return told is not None and self.now_ms() - told[1] < self.table.expire_ms

    def has_slave(self) -> bool:
        return self.table.has_slave(self.identity.key.broker_name, self.now_ms(), self.identity)

    def scan(self) -> None:
        """Drop the silent brokers, every SCAN_INTERVAL_MS at most (call it as often as convenient)."""
        now = self.now_ms()
        if now - self._scanned_ms < SCAN_INTERVAL_MS:
            return
        self._scanned_ms = now
        for key in self.table.scan(now):
            log.warning("broker %s (id %d) at %s silent for its heartbeat timeout: dropped from the routes",
                        key.broker_name, key.broker_id, key.broker_addr)
