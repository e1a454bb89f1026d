"""The NameServer's broker table (RocketMQ's RouteInfoManager): who registered, and the routes it makes.

Entries are keyed ``(cluster, broker name, broker id)`` and hold the address, the HA address and the
topics the broker registered. A registration replaces whatever held its key, and an address
registering under another id of its broker name leaves its old id (a slave promoted to master). A
broker silent for its heartbeat timeout (``heartbeatTimeoutMillis``, else ``expire_ms``) is gone:
routes skip it at once and ``scan`` drops it. Time is given, never read, so tests need not wait.

A route merges the broker the front itself serves (``local``, always live) with the registered
ones: one BrokerData per broker name listing all its ids, and one QueueData per broker name taken
from its master (id 0) or, when the master is gone, its smallest-id slave, without the write bit
(so producers never send to a slave, and consumers still find the queues). A broker that
registered ``TBW102`` with the inherit bit makes topics on their first send (autoCreateTopicEnable):
a topic it has not made yet is routed to it with ``TBW102``'s queue counts, as RocketMQ's clients do
with the default topic's route.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mqstore.ipc.remoting.registration import (
    MASTER_ID,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    BrokerKey,
    BrokerRegistration,
    TopicQueues,
)

DEFAULT_TOPIC = "TBW102"  # RocketMQ's template topic: a broker that makes topics on first send registers it
SYSTEM_PREFIXES = ("rmq_sys_", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_")


@dataclass(slots=True)
class _Entry:
    registration: BrokerRegistration
    last_ms: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class Master:
    """The live master of a broker name, as a slave's registration is answered."""

    addr: str
    ha_addr: str


class BrokerTable:
    def __init__(self, expire_ms: int) -> None:
        self.expire_ms = expire_ms
        self._entries: dict[tuple[str, str, int], _Entry] = {}

    def register(self, registration: BrokerRegistration, now_ms: int) -> None:
        key = registration.key
        for old_key, entry in list(self._entries.items()):  # the same address under another id: a role switch
            old = entry.registration.key
            if (old.cluster, old.broker_name) == (key.cluster, key.broker_name) and old.broker_addr == key.broker_addr \
                    and old.broker_id != key.broker_id:
                del self._entries[old_key]
        self._entries[(key.cluster, key.broker_name, key.broker_id)] = _Entry(
            registration, now_ms, registration.heartbeat_timeout_ms or self.expire_ms)

    def unregister(self, key: BrokerKey) -> bool:
        """Remove the broker name's entry at that address (RocketMQ removes by address); whether one was."""
        for table_key, entry in list(self._entries.items()):
            old = entry.registration.key
            if (old.cluster, old.broker_name, old.broker_addr) == (key.cluster, key.broker_name, key.broker_addr):
                del self._entries[table_key]
                return True
        return False

    def scan(self, now_ms: int) -> list[BrokerKey]:
        """Drop the brokers silent past their timeout; who was dropped."""
        gone = [k for k, e in self._entries.items() if not self._live(e, now_ms)]
        return [self._entries.pop(k).registration.key for k in gone]

    def live(self, now_ms: int, local: BrokerRegistration | None = None) -> dict[str, dict[int, BrokerRegistration]]:
        """Broker name -> broker id -> registration, of the live brokers and ``local`` (which wins its
        key and its address)."""
        members: dict[str, dict[int, BrokerRegistration]] = {}
        for entry in self._entries.values():
            key = entry.registration.key
            if not self._live(entry, now_ms):
                continue
            if local is not None and (key.broker_addr == local.key.broker_addr
                                      or (key.broker_name, key.broker_id) == (local.key.broker_name,
                                                                              local.key.broker_id)):
                continue
            members.setdefault(key.broker_name, {})[key.broker_id] = entry.registration
        if local is not None:
            members.setdefault(local.key.broker_name, {})[local.key.broker_id] = local
        return members

    def master(self, broker_name: str, now_ms: int, local: BrokerRegistration | None = None) -> Master | None:
        master = self.live(now_ms, local).get(broker_name, {}).get(MASTER_ID)
        return None if master is None else Master(master.key.broker_addr, master.ha_addr)

    def has_slave(self, broker_name: str, now_ms: int, local: BrokerRegistration | None = None) -> bool:
        return any(i != MASTER_ID for i in self.live(now_ms, local).get(broker_name, {}))

    def route(self, topic: str, now_ms: int, local: BrokerRegistration | None = None) -> dict[str, Any] | None:
        """TopicRouteData for ``topic`` (None: no broker has its queues, TOPIC_NOT_EXIST)."""
        queue_datas, broker_datas = [], []
        for name, ids in sorted(self.live(now_ms, local).items()):
            prime_id = min(ids)
            queues = _queues_for(ids[prime_id], topic)
            if queues is None:
                continue
            perm = queues.perm & ~PERM_INHERIT
            if prime_id != MASTER_ID:
                perm &= ~PERM_WRITE
            queue_datas.append({"brokerName": name, "readQueueNums": queues.read_queues,
                                "writeQueueNums": queues.write_queues, "perm": perm,
                                "topicSysFlag": queues.sys_flag})
            broker_datas.append(_broker_data(name, ids))
        if not queue_datas:
            return None
        return {"orderTopicConf": None, "queueDatas": queue_datas, "brokerDatas": broker_datas,
                "filterServerTable": {}}

    def cluster_info(self, now_ms: int, local: BrokerRegistration | None = None) -> dict[str, Any]:
        """ClusterInfo: every broker name's BrokerData, and each cluster's broker names."""
        members = self.live(now_ms, local)
        clusters: dict[str, list[str]] = {}
        for name, ids in sorted(members.items()):
            clusters.setdefault(ids[min(ids)].key.cluster, []).append(name)
        return {"brokerAddrTable": {name: _broker_data(name, ids) for name, ids in sorted(members.items())},
                "clusterAddrTable": clusters}

    def _live(self, entry: _Entry, now_ms: int) -> bool:
        return now_ms - entry.last_ms < entry.timeout_ms


def _broker_data(name: str, ids: dict[int, BrokerRegistration]) -> dict[str, Any]:
    return {"cluster": ids[min(ids)].key.cluster, "brokerName": name,
            "brokerAddrs": {str(i): r.key.broker_addr for i, r in sorted(ids.items())}, "enableActingMaster": False}


def _queues_for(registration: BrokerRegistration, topic: str) -> TopicQueues | None:
    queues = registration.topics.get(topic)
    if queues is not None:
        return queues
    template = registration.topics.get(DEFAULT_TOPIC)
    if template is None or not template.perm & PERM_INHERIT or topic.startswith(SYSTEM_PREFIXES):
        return None
    return TopicQueues(topic, template.read_queues, template.write_queues, PERM_READ | PERM_WRITE)
