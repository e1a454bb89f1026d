"""The remoting front with RocketMQ's ACL ([remoting] acl_file), against the stock RocketMQ client
(``rocketmq`` 0.4.4, ``set_session_credentials``) and raw signed requests."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.ipc.remoting import codec as rm
from mqstore.ipc.remoting.signature import Credentials
from tests.integration.broker import Broker, free_port_range, wait_for
from tests.integration.test_remoting import peer

pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")

COUNT = 20
ACL = """\
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Acl=PUB]
  - accessKey: consumer1
    secretKey: consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Acl=SUB]
    groupPerms: [CG_acl=SUB]
  - accessKey: operator
    secretKey: operator-secret
    admin: true
"""
PRODUCER = Credentials("producer1", "producer-secret")
CONSUMER = Credentials("consumer1", "consumer-secret")


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, str, Path]]:
    root = tmp_path_factory.mktemp("remoting-acl")
    (root / "plain_acl.yml").write_text(ACL)
    port = free_port_range(1)
    broker = Broker(root, remoting_port=port, commitlog=1024 * 1024, cq=4096,
                    extra_toml='\n[remoting]\nacl_file = "plain_acl.yml"\n')
    with broker:
        yield broker, f"127.0.0.1:{port}", root


def denied(broker: Broker) -> dict[str, int]:
    status = broker.status() or {}
    return dict(status.get("actors", {}).get("remoting", {}).get("acl_denied", {}))


def client(ns: str, credentials: Credentials | None = None) -> rm.RemotingClient:
    host, port = ns.split(":")
    return rm.RemotingClient(host, int(port), credentials=credentials)


@pytest.fixture(scope="module")
def produced(front: tuple[Broker, str, Path]) -> list[dict[str, Any]]:
    _, ns, home = front
    return peer(home, "produce", ns, "Acl", COUNT, "--access-key", PRODUCER.access_key, "--secret-key",
                PRODUCER.secret_key)


@pytest.mark.slow
def test_the_right_accounts_produce_and_consume(front: tuple[Broker, str, Path],
                                                produced: list[dict[str, Any]]) -> None:
    _, ns, home = front
    assert [r.get("status") for r in produced] == ["OK"] * COUNT
    got = peer(home, "push", ns, "Acl", "CG_acl", COUNT, 120, "--access-key", CONSUMER.access_key, "--secret-key",
               CONSUMER.secret_key)
    assert {m["id"] for m in got} == {r["msg_id"] for r in produced}


@pytest.mark.slow
@pytest.mark.parametrize("who, reason", [
    ((), "unsigned"),
    (("--access-key", "producer1", "--secret-key", "not-the-secret"), "signature"),
    (("--access-key", "consumer1", "--secret-key", "consumer-secret"), "permission"),  # SUB only
])
def test_the_stock_producer_is_refused_without_the_right_account(front: tuple[Broker, str, Path],
                                                                 who: tuple[str, ...], reason: str) -> None:
    broker, ns, home = front
    before = denied(broker).get(reason, 0)
    lines = peer(home, "produce", ns, "Acl", 1, "--give-up-after", 1, *who)
    assert lines[-1] == {"gave_up": True} and not any("status" in line for line in lines)
    wait_for(lambda: denied(broker).get(reason, 0) > before, 10, f"a refusal counted as {reason}")


@pytest.mark.slow
def test_an_account_without_the_groups_permission_cannot_move_its_offset(front: tuple[Broker, str, Path],
                                                                         produced: list[dict[str, Any]]) -> None:
    _, ns, _ = front
    where = {"consumerGroup": "CG_raw", "topic": "Acl", "queueId": 0}
    with client(ns, CONSUMER) as owner, client(ns, PRODUCER) as other, client(ns) as anonymous:
        # consumer1 may use CG_acl only: CG_raw is refused to it as to everyone else
        assert owner.call(rm.UPDATE_CONSUMER_OFFSET, {**where, "commitOffset": 1}).code == rm.NO_PERMISSION
        where["consumerGroup"] = "CG_acl"
        assert owner.call(rm.UPDATE_CONSUMER_OFFSET, {**where, "commitOffset": 2}).code == rm.SUCCESS
        for intruder in (other, anonymous):
            reply = intruder.call(rm.UPDATE_CONSUMER_OFFSET, {**where, "commitOffset": 0})
            assert reply.code == rm.NO_PERMISSION, reply.remark
        assert reply.remark == "username cannot be null."
        refused = other.call(rm.UPDATE_CONSUMER_OFFSET, {**where, "commitOffset": 0})
        assert refused.remark == ("User:producer1 has no permission to access Group:CG_acl from 127.0.0.1, the "
                                  "decision is deny.")
        assert owner.call(rm.QUERY_CONSUMER_OFFSET, where).ext["offset"] == "2"
        # reading by physical offset: the message's topic decides, not the request
        assert anonymous.call(rm.VIEW_MESSAGE_BY_ID, {"offset": 0}).code == rm.NO_PERMISSION
        assert other.call(rm.VIEW_MESSAGE_BY_ID, {"offset": 0}).code == rm.NO_PERMISSION  # PUB only
        view = owner.call(rm.VIEW_MESSAGE_BY_ID, {"offset": 0})
        assert view.code == rm.SUCCESS and rm.decode_records(view.body)[0].topic == "Acl"
        # admin requests need the admin flag; route queries need nothing
        assert owner.call(17, {"topic": "New"}).code == rm.NO_PERMISSION
        with client(ns, Credentials("operator", "operator-secret")) as operator:
            assert operator.call(17, {"topic": "New"}).code == rm.REQUEST_CODE_NOT_SUPPORTED
        assert anonymous.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "Acl"}).code == rm.SUCCESS


@pytest.mark.slow
def test_a_refused_oneway_request_gets_no_answer(front: tuple[Broker, str, Path]) -> None:
    broker, ns, _ = front
    before = denied(broker).get("unsigned", 0)
    host, port = ns.split(":")
    end = rm.RemotingCommand(rm.END_TRANSACTION, 1, rm.FLAG_ONEWAY, None, {
        "producerGroup": "PG", "tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "12"})
    route = rm.RemotingCommand(rm.GET_ROUTEINFO_BY_TOPIC, 2, 0, None, {"topic": "Acl"})
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(rm.encode_command(end) + rm.encode_command(route))
        reader = sock.makefile("rb")
        first = rm.decode_command(reader.read(rm.frame_length(reader.read(4))))
    assert (first.opaque, first.code) == (2, rm.SUCCESS)  # the route's answer is the first and only
    wait_for(lambda: denied(broker).get("unsigned", 0) > before, 10, "the oneway refusal counted")


@pytest.mark.slow
def test_a_changed_acl_file_is_taken_up(front: tuple[Broker, str, Path]) -> None:
    broker, ns, root = front
    send = {"topic": "Later", "producerGroup": "PG", "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0}
    with client(ns, PRODUCER) as producer:
        assert producer.call(rm.SEND_MESSAGE, send, b"x").code == rm.NO_PERMISSION
        fresh = root / "plain_acl.yml.new"
        fresh.write_text(ACL.replace("topicPerms: [Acl=PUB]", "topicPerms: [Acl=PUB, Later=PUB]"))
        os.replace(fresh, root / "plain_acl.yml")
        wait_for(lambda: producer.call(rm.SEND_MESSAGE, send, b"x").code == rm.SUCCESS, 20, "the new rules")
        (root / "plain_acl.yml").write_text("accounts: [broken\n")  # kept out: the last good rules stay
        # the file is looked at as requests come: each poll sends one
        wait_for(lambda: producer.call(rm.SEND_MESSAGE, send, b"x").code == rm.SUCCESS
                 and "keeping the rules read before" in broker.logs(), 20, "the broken file logged")
        (root / "plain_acl.yml").write_text(ACL)
