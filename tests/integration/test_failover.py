"""Failover through the stock RocketMQ client (``rocketmq`` 0.4.4): a SYNC_MASTER (in_sync_replicas 2)
and its slave, both fronts NameServers listed by both brokers and by the clients, a stock producer
sending without pause and a stock push consumer consuming meanwhile.

- The master's machine lost (its whole tree SIGKILLed, its store deleted) and the slave promoted
  while it runs: every SEND_OK is in the promoted store, a new group reads each once, the group that
  was consuming reads each at least once, the slave's log is the master's byte for byte up to the
  promotion's point, and the same producer's sends go on to the promoted broker once the routes
  name it the master. (A stock producer that hangs in a send cut by its broker's death, a bug of the
  C++ client, is started again with the same addresses: ``StockProducer``; each report says how often.)
- The slave SIGKILLed and restarted mid-stream, then the master: every SEND_OK is in the slave's log
  once it is back (a SYNC_MASTER never answers SEND_OK without it), and the slave's log is the
  master's byte for byte.
- The old master back after a promotion: started as a master it is refused (the NameServers list
  the promoted one); started as the promoted one's slave it cuts what the new master never had and
  follows, its log then the new master's byte for byte.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from mqstore.engine.ha.promotion import read_role
from mqstore.ipc.client.api import Consumer
from tests.integration.broker import wait_for
from tests.integration.failover_cluster import (
    TOPIC,
    Node,
    Peer,
    StockProducer,
    log_bytes,
    namesrv_of,
    node,
    peer,
    ports,
    uniq_keys,
    wait_members,
    written,
)

pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")


def report(name: str, **numbers: object) -> None:
    print(f"{name}: " + json.dumps(numbers))


@pytest.mark.slow
def test_the_master_lost_and_the_slave_promoted_under_stock_clients_loses_no_send_ok(tmp_path: Path) -> None:
    pm, ps = ports(2)
    ns = namesrv_of((pm, ps))
    master = node(tmp_path / "m", pm, ns)
    slave = node(tmp_path / "s", ps, ns, broker_id=1, master_ha=f"127.0.0.1:{pm + 1}")
    producer: StockProducer | None = None
    consumer: Peer | None = None
    try:
        master.broker.start()
        slave.broker.start()
        wait_members((pm, ps), {0: master.addr, 1: slave.addr})
        producer = StockProducer(tmp_path, ns)
        consumer = Peer.start(tmp_path, "push", "push", ns, TOPIC, "G", 0, 0, "--stream")
        wait_for(lambda: len(producer.oks()) >= 300 and len(consumer.lines()) >= 100, 60,
                 "300 SEND_OK and 100 deliveries before the loss")

        master.broker.kill_tree()
        oks_at_loss = len(producer.oks())
        aside = tmp_path / "master-commitlog"  # the page cache still holds what the master wrote
        shutil.copytree(master.broker.store / "commitlog", aside)
        shutil.rmtree(master.broker.store)

        promoted = slave.broker.mqstore("promote", "--role", "ASYNC_MASTER", "--wait-ms", "90000")
        assert promoted.returncode == 0, promoted.stderr + slave.broker.logs()
        stored = read_role(slave.broker.store)
        assert stored is not None and stored.epoch == 2
        wait_members((ps,), {0: slave.addr})

        oks_at_promotion = len(producer.oks())  # the master is gone: every SEND_OK from here is the promoted one's
        wait_for(lambda: len(producer.oks()) >= oks_at_promotion + 50, 90,
                 "the same producer's SEND_OK from the promoted broker")
        sent = producer.stop()
        oks = [r for r in sent if r.get("status") == "OK"]
        ok_ids = {r["msg_id"] for r in oks}
        wait_for(lambda: ok_ids <= {m["id"] for m in consumer.lines()}, 90, "group G to read every SEND_OK")
        delivered = consumer.stop()

        fresh = peer(tmp_path, "pull", ns, TOPIC, "NewGroup")
        counts = Counter(m["id"] for m in fresh)
        assert all(counts[i] == 1 for i in ok_ids), "a new group read a SEND_OK twice or never"
        assert not [i for i, n in counts.items() if n > 1]

        end = stored.start  # the promotion's point: the slave's last whole record
        master_log = log_bytes(aside, 1 << 40)
        assert len(master_log) >= end and end > 0
        assert log_bytes(slave.broker.store / "commitlog", end) == master_log[:end]
        wait_for(lambda: written(slave.broker) > end, 30, "the promoted broker to report the sends since")
        g_counts = Counter(m["id"] for m in delivered)
        report("master lost", producer_restarts=producer.restarts, sent=len(sent), send_ok=len(oks),
               send_ok_at_loss=oks_at_loss,
               other=Counter(r.get("status", "error") for r in sent if r.get("status") != "OK"),
               new_group_read=len(fresh), new_group_duplicates=sum(n - 1 for n in counts.values()),
               group_g_deliveries=len(delivered), group_g_duplicates=sum(n - 1 for n in g_counts.values()),
               promotion_point=end)
    finally:
        if producer is not None:
            producer.stop()
        if consumer is not None:
            consumer.stop()
        for n in (slave, master):
            n.broker.__exit__()




def stored_ids(node_: Node, want: set[str]) -> set[str]:
    """The message ids a broker's own store serves (mqstore's consumer on its readers), read until
    ``want`` is among them or the deadline passes."""
    got: set[str] = set()
    with Consumer(node_.broker.store, group="check", topic=TOPIC, queues=list(range(4)), start="earliest") as c:
        def more() -> bool:
            got.update(str(m.uniq_key) for m in c.poll(200))
            return want <= got
        with contextlib.suppress(AssertionError):  # the caller's assertion says what is missing
            wait_for(more, 30, f"{len(want)} messages in {node_.broker.store}")
    return got


def caught_up(master: Node, slave: Node) -> int:
    """Wait until the slave holds the master's whole log; its end."""
    end = int(wait_for(lambda: written(master.broker) if written(master.broker) > 0 else 0, 30, "the master's end"))
    wait_for(lambda: written(slave.broker) >= end, 60, f"the slave to reach {end}")
    return end


@pytest.mark.slow
def test_the_slave_then_the_master_restarted_mid_stream_lose_no_send_ok(tmp_path: Path) -> None:
    pm, ps = ports(2)
    ns = namesrv_of((pm, ps))
    master = node(tmp_path / "m", pm, ns)
    slave = node(tmp_path / "s", ps, ns, broker_id=1, master_ha=master.ha)
    producer: StockProducer | None = None
    try:
        master.broker.start()
        slave.broker.start()
        wait_members((pm, ps), {0: master.addr, 1: slave.addr})
        producer = StockProducer(tmp_path, ns)
        wait_for(lambda: len(producer.oks()) >= 200, 60, "200 SEND_OK before the slave's loss")
        slave.broker.kill_tree()
        # the stock C++ client retries a SLAVE_NOT_AVAILABLE or FLUSH_SLAVE_TIMEOUT answer on another
        # queue and raises when all fail: either way, not SEND_OK
        wait_for(lambda: [r for r in producer.lines() if r.get("status") != "OK"], 60,
                 "the master to answer without its slave")
        slave.broker.start()
        at_slave_back = len(producer.oks())
        wait_for(lambda: len(producer.oks()) >= at_slave_back + 200, 60, "200 SEND_OK once the slave is back")
        master.broker.kill_tree()
        master.broker.start()
        at_master_back = len(producer.oks())
        wait_for(lambda: len(producer.oks()) >= at_master_back + 200, 90, "200 SEND_OK once the master is back")
        sent = producer.stop()
        end = caught_up(master, slave)
        assert log_bytes(slave.broker.store / "commitlog", end) == log_bytes(master.broker.store / "commitlog", end)
        oks = {r["msg_id"] for r in sent if r.get("status") == "OK"}
        in_slave = stored_ids(slave, oks)
        assert oks <= in_slave
        report("slave then master restarted", producer_restarts=producer.restarts, sent=len(sent), send_ok=len(oks),
               other=Counter(r.get("status", "error") for r in sent if r.get("status") != "OK"),
               in_slave=len(in_slave), end=end)
    finally:
        if producer is not None:
            producer.stop()
        for n in (slave, master):
            n.broker.__exit__()


@pytest.mark.slow
def test_the_old_master_back_after_a_promotion_is_refused_as_a_master_and_follows_as_a_slave(tmp_path: Path) -> None:
    pm, ps = ports(2)
    ns = namesrv_of((pm, ps))
    master = node(tmp_path / "m", pm, ns)
    slave = node(tmp_path / "s", ps, ns, broker_id=1, master_ha=master.ha)
    producer: StockProducer | None = None
    try:
        master.broker.start()
        slave.broker.start()
        wait_members((pm, ps), {0: master.addr, 1: slave.addr})
        producer = StockProducer(tmp_path, ns)
        wait_for(lambda: len(producer.oks()) >= 200, 60, "200 SEND_OK before the loss")
        master.broker.kill_tree()  # its store kept: the machine comes back
        old_end = len(log_bytes(master.broker.store / "commitlog", 1 << 40).rstrip(b"\0"))
        oks_at_loss = {r["msg_id"] for r in producer.oks()}
        assert slave.broker.mqstore("promote", "--role", "SYNC_MASTER", "--wait-ms", "90000").returncode == 0
        stored = read_role(slave.broker.store)
        assert stored is not None
        # what the old master held past the promotion's point is cut when it rejoins: never a SEND_OK,
        # since a SYNC_MASTER with in_sync_replicas 2 answers SEND_OK only once the slave holds it
        past_the_point = uniq_keys(master.broker.store / "commitlog", stored.start)
        assert not oks_at_loss & set(past_the_point)
        wait_members((ps,), {0: slave.addr})

        refused = master.broker.mqstore("start", "--config", str(master.broker.root / "broker.toml"),
                                        "--remoting", "on", "--remoting-port", str(pm), timeout_s=60)
        assert refused.returncode == 2 and f"live master of broker-a at {slave.addr}" in refused.stderr, \
            refused.stderr
        assert "--role SLAVE" in refused.stderr

        master.broker.start_args += ("--role", "SLAVE", "--broker-id", "1", "--master", slave.ha)
        master.broker.start()
        wait_members((pm, ps), {0: slave.addr, 1: master.addr})
        at_rejoin = len(producer.oks())
        wait_for(lambda: len(producer.oks()) >= at_rejoin + 100, 90, "100 SEND_OK with the old master following")
        sent = producer.stop()
        end = caught_up(slave, master)
        assert log_bytes(master.broker.store / "commitlog", end) == log_bytes(slave.broker.store / "commitlog", end)
        oks = {r["msg_id"] for r in sent if r.get("status") == "OK"}
        assert oks <= stored_ids(master, oks)  # the old master, now a slave, holds every SEND_OK
        report("old master back", producer_restarts=producer.restarts, sent=len(sent), send_ok=len(oks),
               other=Counter(r.get("status", "error") for r in sent if r.get("status") != "OK"),
               promotion_point=stored.start, old_master_end=old_end, cut_records=len(past_the_point),
               end=end)
    finally:
        if producer is not None:
            producer.stop()
        for n in (slave, master):
            n.broker.__exit__()


def status_written(node_: Node) -> int:
    """A slave's written end, as ``mqstore status --json`` shows it."""
    shown = node_.broker.mqstore("status", "--json")
    assert shown.returncode == 0, shown.stderr
    return int(json.loads(shown.stdout)["actors"]["ha"]["written"])


@pytest.mark.slow
def test_three_brokers_the_master_lost_the_furthest_slave_promoted_and_the_other_follows_it(tmp_path: Path) -> None:
    pm, p1, p2 = ports(3)
    ns = namesrv_of((pm, p1, p2))
    master = node(tmp_path / "m", pm, ns)
    slaves = [node(tmp_path / f"s{i}", p, ns, broker_id=i, master_ha=master.ha) for i, p in ((1, p1), (2, p2))]
    producer: StockProducer | None = None
    try:
        for n in (master, *slaves):
            n.broker.start()
        wait_members((pm, p1, p2), {0: master.addr, 1: slaves[0].addr, 2: slaves[1].addr})
        producer = StockProducer(tmp_path, ns)
        wait_for(lambda: len(producer.oks()) >= 300, 60, "300 SEND_OK before the loss")
        master.broker.kill_tree()
        shutil.rmtree(master.broker.store)
        oks_at_loss = {r["msg_id"] for r in producer.oks()}
        ends = [status_written(s) for s in slaves]
        furthest, other = (slaves[0], slaves[1]) if ends[0] >= ends[1] else (slaves[1], slaves[0])
        assert furthest.broker.mqstore("promote", "--role", "SYNC_MASTER", "--wait-ms", "90000").returncode == 0
        stored = read_role(furthest.broker.store)
        assert stored is not None and stored.start == max(ends)
        # the other slave follows its master's HA address from its settings, so it needs a restart
        other.broker.stop()
        other.broker.start_args = tuple(a if a != master.ha else furthest.ha for a in other.broker.start_args)
        other.broker.start()
        wait_members((p1, p2), {0: furthest.addr, slaves.index(other) + 1: other.addr})
        at_follow = len(producer.oks())
        wait_for(lambda: len(producer.oks()) >= at_follow + 100, 90, "100 SEND_OK with the other slave following")
        sent = producer.stop()
        end = caught_up(furthest, other)
        assert log_bytes(other.broker.store / "commitlog", end) == log_bytes(furthest.broker.store / "commitlog", end)
        oks = {r["msg_id"] for r in sent if r.get("status") == "OK"}
        assert oks_at_loss <= oks
        assert oks <= stored_ids(furthest, oks)
        assert oks <= stored_ids(other, oks)
        report("three brokers", producer_restarts=producer.restarts, sent=len(sent), send_ok=len(oks),
               send_ok_at_loss=len(oks_at_loss),
               other=Counter(r.get("status", "error") for r in sent if r.get("status") != "OK"),
               slave_ends_at_loss=ends, promotion_point=stored.start, end=end)
    finally:
        if producer is not None:
            producer.stop()
        for n in (*slaves, master):
            n.broker.__exit__()
