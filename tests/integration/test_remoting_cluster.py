"""A cluster behind one NameServer: two independent master brokers (their own names, stores and ports)
both register with the first one's front; the stock RocketMQ client (``rocketmq`` 0.4.4) given that one
address spreads a topic's sends over both brokers and consumes every message from both, and a broker
SIGKILLed leaves the routes once its registration expires."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.ipc.client.api import Consumer
from mqstore.ipc.remoting import codec as rm
from tests.integration.broker import Broker, free_port_range, wait_for
from tests.integration.test_remoting import peer

pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")

COUNT = 200
EXPIRE_MS = 3_000


def cluster_toml(name: str, namesrv: str = "") -> str:
    listed = f'namesrv = "{namesrv}"\n' if namesrv else ""
    return (f'\n[remoting]\nbroker_name = "{name}"\n{listed}register_interval_ms = 500\n'
            f"broker_expire_ms = {EXPIRE_MS}\n")


def route(ns_port: int, topic: str) -> dict[str, Any] | None:
    with rm.RemotingClient("127.0.0.1", ns_port) as client:
        reply = client.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return json.loads(reply.body) if reply.code == rm.SUCCESS else None


def broker_names(ns_port: int, topic: str) -> set[str]:
    found = route(ns_port, topic)
    return set() if found is None else {b["brokerName"] for b in found["brokerDatas"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, Broker, int, Path]]:
    root = tmp_path_factory.mktemp("cluster")
    port_a, port_b = free_port_range(1), free_port_range(1)
    namesrv = f"127.0.0.1:{port_a}"
    (root / "a").mkdir()
    (root / "b").mkdir()
    a = Broker(root / "a", remoting_port=port_a, extra_toml=cluster_toml("broker-a", namesrv))
    b = Broker(root / "b", remoting_port=port_b, extra_toml=cluster_toml("broker-b"))
    b.start_args += ("--namesrv", namesrv)  # b's from the command line, a's from its config file
    with a, b:
        yield a, b, port_a, root


@pytest.mark.slow
def test_stock_clients_given_one_nameserver_use_both_brokers_and_a_dead_one_leaves_the_routes(
        cluster: tuple[Broker, Broker, int, Path]) -> None:
    a, b, port_a, home = cluster
    wait_for(lambda: broker_names(port_a, "Spread") == {"broker-a", "broker-b"}, 30, "both brokers in the route")
    produced = peer(home, "produce", f"127.0.0.1:{port_a}", "Spread", COUNT)
    # a send the stock client gave up on (its 3 s timeout, on a loaded machine) is said and sent again
    errors = [r for r in produced if "error" in r]
    produced = [r for r in produced if "status" in r]
    assert {r["status"] for r in produced} == {"OK"} and len(produced) == COUNT, errors

    stored = {}
    for broker in (a, b):  # what each broker's own store holds, read by mqstore's own consumer
        with Consumer(broker.store, group="own", topic="Spread", start="earliest") as consumer:
            stored[broker.root.name] = [m.uniq_key for m in consumer.messages(COUNT, timeout_ms=3_000)]
    assert all(stored.values()), f"one broker got no message: { {k: len(v) for k, v in stored.items()} }"
    held = Counter(stored["a"] + stored["b"])
    assert all(held[r["msg_id"]] == 1 for r in produced)  # every SEND_OK stored, once
    assert sum(held.values()) - COUNT <= len(errors), errors  # beyond them, only sends the client gave up on

    pushed = peer(home, "push", f"127.0.0.1:{port_a}", "Spread", "CG_cluster_push", sum(held.values()), 120)
    assert Counter(m["id"] for m in pushed) == held
    pulled = peer(home, "pull", f"127.0.0.1:{port_a}", "Spread", "CG_cluster_pull")
    assert Counter(m["id"] for m in pulled) == held

    route_b = route(port_a, "Spread")
    assert route_b is not None
    assert {q["brokerName"]: q["perm"] for q in route_b["queueDatas"]} == {"broker-a": 6, "broker-b": 6}
    with rm.RemotingClient("127.0.0.1", port_a) as client:
        info = json.loads(client.call(rm.GET_BROKER_CLUSTER_INFO).body)
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}

    b.kill_tree()  # no unregistration: only the expiry takes it out
    wait_for(lambda: broker_names(port_a, "Spread") == {"broker-a"}, 60, "the dead broker to leave the route")
    assert "broker-b" not in json.loads(_cluster_info(port_a))["brokerAddrTable"]


def test_a_bad_namesrv_flag_is_refused_before_the_broker_starts(tmp_path: Path) -> None:
    broker = Broker(tmp_path, remoting_port=free_port_range(1))
    refused = broker.mqstore("start", "--namesrv", "127.0.0.1:9876;nohost", "--remoting", "off")
    assert refused.returncode == 2 and "remoting.namesrv" in refused.stderr


def _cluster_info(port: int) -> bytes:
    with rm.RemotingClient("127.0.0.1", port) as client:
        return client.call(rm.GET_BROKER_CLUSTER_INFO).body
