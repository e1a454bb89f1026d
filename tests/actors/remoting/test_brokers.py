"""The NameServer's broker table: registration, a role switch, expiry on an injected clock, routes that
merge the front's own broker with the registered ones, the prime slave and its read-only queues; and
the NameServer's answers to REGISTER_BROKER, UNREGISTER_BROKER and GET_BROKER_CLUSTER_INFO."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mqstore.actors.config import BrokerConfig, BrokerSection
from mqstore.actors.config_listeners import RemotingConfig
from mqstore.actors.remoting.brokers import BrokerTable
from mqstore.actors.remoting.headers import Peer
from mqstore.actors.remoting.namesrv import NameServer
from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.registration import BrokerKey, BrokerRegistration, TopicQueues, encode_register

EXPIRE_MS = 120_000
TBW = TopicQueues("TBW102", 8, 8, 7)
PEER = Peer(1, "127.0.0.1", 5000)


def broker(name: str, broker_id: int, addr: str, *topics: TopicQueues, timeout_ms: int | None = None,
           cluster: str = "C") -> BrokerRegistration:
    return BrokerRegistration(BrokerKey(cluster, name, addr, broker_id), addr.replace(":10911", ":10912"),
                              {t.name: t for t in topics}, {}, timeout_ms)


def queue_datas(route: dict[str, Any] | None) -> dict[str, tuple[int, int]]:
    assert route is not None
    return {q["brokerName"]: (q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]}


def addrs(route: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    assert route is not None
    return {b["brokerName"]: b["brokerAddrs"] for b in route["brokerDatas"]}


def test_a_route_lists_every_broker_name_with_all_its_ids_and_the_masters_queues() -> None:
    table = BrokerTable(EXPIRE_MS)
    table.register(broker("b", 0, "10.0.0.2:10911", TopicQueues("T", 4, 4, 6)), 0)
    table.register(broker("b", 1, "10.0.0.3:10911", TopicQueues("T", 2, 2, 4)), 0)
    table.register(broker("c", 0, "10.0.0.4:10911"), 0)  # has no T and makes no topics: not in T's route
    local = broker("a", 0, "10.0.0.1:10911", TopicQueues("T", 8, 8, 6))
    route = table.route("T", 1, local)
    assert addrs(route) == {"a": {"0": "10.0.0.1:10911"}, "b": {"0": "10.0.0.2:10911", "1": "10.0.0.3:10911"}}
    assert queue_datas(route) == {"a": (8, 6), "b": (4, 6)}  # b's from its master, not its slave
    assert table.route("U", 1, broker("a", 0, "10.0.0.1:10911")) is None  # nobody has U: TOPIC_NOT_EXIST


def test_a_broker_that_makes_topics_on_first_send_is_routed_a_topic_it_has_not_made_yet() -> None:
    table = BrokerTable(EXPIRE_MS)
    table.register(broker("b", 0, "10.0.0.2:10911", TBW), 0)
    route = table.route("New", 1)
    assert queue_datas(route) == {"b": (8, 6)}  # TBW102's counts, read and write, never the inherit bit
    assert table.route("rmq_sys_TRACE", 1) is None


def test_without_a_live_master_the_smallest_slave_gives_the_queues_read_only() -> None:
    table = BrokerTable(EXPIRE_MS)
    table.register(broker("b", 0, "10.0.0.2:10911", TopicQueues("T", 4, 4, 6)), 0)
    table.register(broker("b", 2, "10.0.0.4:10911", TopicQueues("T", 4, 4, 6)), 0)
    table.register(broker("b", 1, "10.0.0.3:10911", TopicQueues("T", 4, 4, 6)), 0)
    assert table.unregister(BrokerKey("C", "b", "10.0.0.2:10911", 0))
    route = table.route("T", 1)
    assert addrs(route) == {"b": {"1": "10.0.0.3:10911", "2": "10.0.0.4:10911"}}
    assert queue_datas(route) == {"b": (4, 4)}  # consumers find the queues; producers see no write bit
    assert table.master("b", 1) is None and table.has_slave("b", 1)


def test_the_same_address_under_another_id_replaces_its_old_entry() -> None:
    table = BrokerTable(EXPIRE_MS)
    table.register(broker("b", 0, "10.0.0.2:10911", TopicQueues("T", 4, 4, 6)), 0)
    table.register(broker("b", 1, "10.0.0.3:10911", TopicQueues("T", 4, 4, 6)), 0)
    table.register(broker("b", 0, "10.0.0.3:10911", TopicQueues("T", 4, 4, 6)), 10)  # the slave, promoted
    assert addrs(table.route("T", 11)) == {"b": {"0": "10.0.0.3:10911"}}
    master = table.master("b", 11)
    assert master is not None and (master.addr, master.ha_addr) == ("10.0.0.3:10911", "10.0.0.3:10912")


def test_a_silent_broker_leaves_the_routes_at_its_timeout_and_the_scan_drops_it() -> None:
    table = BrokerTable(EXPIRE_MS)
    table.register(broker("b", 0, "10.0.0.2:10911", TBW), 0)
    table.register(broker("c", 0, "10.0.0.3:10911", TBW, timeout_ms=1_000), 0)
    assert set(queue_datas(table.route("T", 999))) == {"b", "c"}
    assert set(queue_datas(table.route("T", 1_000))) == {"b"}  # c's own heartbeat timeout
    assert table.scan(EXPIRE_MS - 1) == [BrokerKey("C", "c", "10.0.0.3:10911", 0)]
    table.register(broker("b", 0, "10.0.0.2:10911", TBW), 50_000)  # a heartbeat renews
    assert table.scan(EXPIRE_MS + 1) == []
    assert table.scan(50_000 + EXPIRE_MS) == [BrokerKey("C", "b", "10.0.0.2:10911", 0)]
    assert table.route("T", 50_000 + EXPIRE_MS) is None


def test_the_local_broker_wins_its_own_key_and_address_over_its_registration_with_itself() -> None:
    table = BrokerTable(EXPIRE_MS)
    table.register(broker("a", 0, "10.0.0.1:10911", TopicQueues("T", 2, 2, 6)), 0)
    route = table.route("T", 1, broker("a", 0, "10.0.0.1:10911", TopicQueues("T", 8, 8, 6)))
    assert queue_datas(route) == {"a": (8, 6)} and addrs(route) == {"a": {"0": "10.0.0.1:10911"}}


class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def nameserver(clock: Clock, role: str = "ASYNC_MASTER", broker_id: int = 0) -> NameServer:
    config = BrokerConfig("/nonexistent", broker=BrokerSection(role=role, broker_id=broker_id),
                          remoting=RemotingConfig(port=10911, broker_name="a", cluster_name="C",
                                                  broker_expire_ms=5_000))
    return NameServer(config, now_ms=clock)


def request(code: int, registration: BrokerRegistration) -> rm.RemotingCommand:
    ext, body = encode_register(registration)
    return rm.RemotingCommand(code, 7, 0, None, ext, body)


def test_a_slaves_registration_is_answered_with_its_live_masters_addresses() -> None:
    clock = Clock()
    ns = nameserver(clock)
    answer = asyncio.run(ns.register(request(rm.REGISTER_BROKER, broker("b", 1, "10.0.0.3:10911")), PEER))
    assert answer.code == rm.SUCCESS and "masterAddr" not in answer.ext  # b has no master yet
    assert asyncio.run(ns.register(request(rm.REGISTER_BROKER, broker("b", 0, "10.0.0.2:10911")), PEER)).code == 0
    answer = asyncio.run(ns.register(request(rm.REGISTER_BROKER, broker("b", 1, "10.0.0.3:10911")), PEER))
    assert (answer.ext["masterAddr"], answer.ext["haServerAddr"]) == ("10.0.0.2:10911", "10.0.0.2:10912")
    # the front's own broker is a live master for its slaves
    answer = asyncio.run(ns.register(request(rm.REGISTER_BROKER, broker("a", 1, "10.0.0.9:10911")), PEER))
    assert (answer.ext["masterAddr"], answer.ext["haServerAddr"]) == ("127.0.0.1:10911", "127.0.0.1:10912")
    clock.ms = 5_000  # b's master went silent: gone for the next slave registration (the slave renews itself)
    answer = asyncio.run(ns.register(request(rm.REGISTER_BROKER, broker("b", 1, "10.0.0.3:10911")), PEER))
    assert "masterAddr" not in answer.ext


def test_a_bad_crc_is_refused_and_unregistration_and_cluster_info_follow_rocketmq() -> None:
    clock = Clock()
    ns = nameserver(clock)
    bad = request(rm.REGISTER_BROKER, broker("b", 0, "10.0.0.2:10911", TBW))
    bad.ext["bodyCrc32"] = str(int(bad.ext["bodyCrc32"]) ^ 4)
    answer = asyncio.run(ns.register(bad, PEER))
    assert (answer.code, answer.remark) == (rm.SYSTEM_ERROR, "crc32 not match")
    assert asyncio.run(ns.register(request(rm.REGISTER_BROKER, broker("b", 0, "10.0.0.2:10911", TBW)), PEER)).code == 0
    info = json.loads(asyncio.run(ns.cluster_info(rm.RemotingCommand(rm.GET_BROKER_CLUSTER_INFO), PEER)).body)
    assert info["clusterAddrTable"] == {"C": ["a", "b"]}
    assert info["brokerAddrTable"]["b"]["brokerAddrs"] == {"0": "10.0.0.2:10911"}
    assert ns.route("T", None) is not None  # b makes topics: T routes to it alone
    unregister = rm.RemotingCommand(rm.UNREGISTER_BROKER, 8, 0, None, {
        "brokerName": "b", "brokerAddr": "10.0.0.2:10911", "clusterName": "C", "brokerId": "0"})
    assert asyncio.run(ns.unregister(unregister, PEER)).code == rm.SUCCESS
    assert ns.route("T", None) is None
    assert asyncio.run(ns.unregister(unregister, PEER)).code == rm.SUCCESS  # unknown: still SUCCESS


def test_a_slave_front_routes_its_own_queues_read_only_until_its_master_registers() -> None:
    clock = Clock()
    ns = nameserver(clock, role="SLAVE", broker_id=1)
    route = ns.route("T", 4)
    assert addrs(route) == {"a": {"1": "127.0.0.1:10911"}} and queue_datas(route) == {"a": (4, 4)}
    assert not ns.master_live()
    asyncio.run(ns.register(request(rm.REGISTER_BROKER, broker("a", 0, "10.0.0.2:10911", TBW)), PEER))
    route = ns.route("T", 4)
    assert addrs(route) == {"a": {"0": "10.0.0.2:10911", "1": "127.0.0.1:10911"}}
    assert queue_datas(route) == {"a": (8, 6)} and ns.master_live()
    clock.ms = 5_000
    assert not ns.master_live()
    ns.note_master("10.0.0.2:10911")  # a NameServer's answer named it
    assert ns.master_live()
