"""Hostile clients against a real broker: scripts/survival/hostile/ at a small size, and the bugs it found,
each test named after its bug."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
import zmq

from mqstore.ipc.client.api import Admin, Producer
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.ha_hello import CHALLENGE_SIZE
from mqstore.scripts.survival.hostile.command import main, parse_args, run
from mqstore.scripts.survival.hostile.ha_attacks import BEFORE_SLAVE, MAX_CONNECTIONS, PLAIN, SECRETED
from mqstore.scripts.survival.hostile.ipc_attacks import IPC_ATTACKS
from tests.integration.broker import Broker, free_port_range, wait_for


@pytest.mark.slow
def test_hostile_clients_smoke(tmp_path: Path) -> None:
    verdict = run(parse_args(["--connections", "40", "--frames", "30", "--flood-frames", "6", "--slow-readers", "4",
                              "--ack-groups", "12", "--ack-max-queues", "6", "--topics", "40",
                              "--seconds", "1.5", "--max-request-bytes", str(2 << 20), "--max-message-bytes",
                              str(1 << 20), "--rss-limit-mb", "2048", "--dir", str(tmp_path)]))
    assert verdict["ok"], verdict["findings"]
    attacks = verdict["attacks"]
    assert set(attacks) == {"oversized_frames", "big_frame_flood", "slow_readers", "connection_flood",
                            "ack_group_flood", "topic_flood", "bad_key_flood", "invalid_msgpack", "wrong_types",
                            "offsets_beyond_max", "remoting_garbage", "remoting_acl", *IPC_ATTACKS}
    assert set(attacks["remoting_garbage"]["answered"]["outcomes"]) == {"closed", "held_open"}  # never answered
    assert attacks["topic_flood"]["answered"]["replies"] == {"OK:PUT_OK": 40}
    assert "skipped" in attacks["bad_key_flood"]["answered"]  # ipc sockets: no keys to get wrong
    assert attacks["ack_group_flood"]["answered"]["replies"] == {"OK": 6, "SERVICE_NOT_AVAILABLE": 6}
    assert all(a["good_client"]["served"] for a in attacks.values())
    assert attacks["offsets_beyond_max"]["answered"]["replies"] == {"OFFSET_OVERFLOW_BADLY": 3, "BAD_REQUEST": 2}
    assert set(attacks["invalid_msgpack"]["answered"]["reader"]) <= {"BAD_REQUEST", "OK", "UNKNOWN_OP"}
    assert attacks["oversized_frames"]["answered"]["body_past_max_message_size"] == {"OK:MESSAGE_ILLEGAL": 1}
    assert set(attacks["system_topic_sends"]["answered"]["replies"]) == {"NO_PERMISSION"}
    assert attacks["oversized_request"]["answered"]["outcome"] == "REQUEST_TOO_LARGE"
    assert set(attacks["premade_run_dir"]["answered"]["outcomes"].values()) == {"refused"}
    assert "skipped" in attacks["keyed_admin"]["answered"]  # ipc sockets: no keys, no roles
    assert "skipped" in attacks["notice_snooping"]["answered"]
    assert verdict["restarts"] == {} and verdict["good_caught_up"]


@pytest.mark.slow
def test_a_curve_key_without_the_admin_role_is_refused_admin_requests_and_the_notice_streams(tmp_path: Path) -> None:
    verdict = run(parse_args(["--tcp", "--attacks", "keyed_admin", "notice_snooping", "--seconds", "1.5",
                              "--dir", str(tmp_path)]))
    assert verdict["ok"], verdict["findings"]
    assert verdict["attacks"]["keyed_admin"]["answered"] == {
        "writer": {"NO_PERMISSION": 2}, "reader": {"NO_PERMISSION": 2}, "send": {"OK:PUT_OK": 1}}
    assert set(verdict["attacks"]["notice_snooping"]["answered"]["outcomes"].values()) == {"refused"}


@pytest.mark.slow
def test_acl_attacks_are_refused_while_a_signed_client_is_served(tmp_path: Path) -> None:
    verdict = run(parse_args(["--attacks", "remoting_acl", "--frames", "30", "--seconds", "1.5",
                              "--dir", str(tmp_path)]))
    assert verdict["ok"], verdict["findings"]
    acl = verdict["attacks"]["remoting_acl"]["answered"]
    calls = {name: answers for name, answers in acl["attacks"].items() if not name.endswith("_oneway")}
    assert len(calls) == 7 and all(answers == {"NO_PERMISSION": 3} for answers in calls.values())
    assert acl["attacks"]["anonymous_end_transaction_oneway"] == {"oneway_sent": 3, "answered": 0}
    assert acl["legit_sends_ok"] == acl["legit_pulled"] == 25 and not acl["legit_failures"]


@pytest.mark.slow
def test_the_replication_port_under_attack_gives_no_byte_and_no_send_ok_to_a_forger(tmp_path: Path) -> None:
    verdict = run(parse_args(["--attacks", "ha_port_plain", "ha_port_secret", "--ha-connections", "40",
                              "--seconds", "1.5", "--dir", str(tmp_path)]))
    assert verdict["ok"], verdict["findings"]
    plain = verdict["ha"]["variants"]["ha_port_plain"]
    secret = verdict["ha"]["variants"]["ha_port_secret"]
    assert set(plain["attacks"]) == set(PLAIN) and set(secret["attacks"]) == set(SECRETED)
    assert plain["attacks"]["forged_report"]["closed"]
    assert plain["attacks"]["forged_report"]["send_status"] in ("SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT")
    assert plain["attacks"]["stand_in"]["send_status"] == "PUT_OK"  # the documented limit of a port with no secret
    for variant, prefix in ((plain, 0), (secret, CHALLENGE_SIZE)):
        answered = {name: a["answered"] for name, a in variant["attacks"].items() if name not in BEFORE_SLAVE}
        flood = answered.pop("connection_flood")
        assert flood["refused_at_once"] == 40 - (MAX_CONNECTIONS - 1) and flood["newcomer_answered"]
        assert flood["closed_in_all"] == 40
        shapes = [*answered.pop("garbage").values(), *answered.values()]
        assert all(a["closed"] and a["bytes_received"] == prefix for a in shapes), shapes
        assert all(a["good_client"]["served"] for a in variant["attacks"].values() if "good_client" in a)
        assert variant["slave_log_equal"] and variant["slave_end"] > 0 and not variant["restarts"]


def test_hostile_cli_rejects_unknown_attacks() -> None:
    with pytest.raises(SystemExit):
        main(["--attacks", "nothing"])


@pytest.mark.slow
def test_reader_replies_to_a_client_that_never_reads_are_bounded_by_reader_hwm(tmp_path: Path) -> None:
    """A DEALER sending hundreds of full pulls and never reading made reader-0 queue every reply
    (ZeroMQ's default high-water mark, 10,000 per connection: 1.4 GiB for 20 such clients). The
    reader's queue per connection is now [broker] reader_hwm; past it replies are dropped."""
    broker = Broker(tmp_path, broker_extra="reader_hwm = 8")
    with broker, Producer(broker.store) as producer:
        assert all(r.ok for r in producer.send_batch([{"topic": "Big", "body": bytes(60_000), "queue_id": 0}] * 8))
        reader = psutil.Process(broker.pid_of("reader-0"))
        before = reader.memory_info().rss
        ctx: zmq.Context[object] = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.RCVHWM, 1)
        sock.connect(broker.endpoints().reader(0))
        pulls = 400  # each reply ~240 KiB (max_transfer_bytes): ~94 MiB if all were queued
        for i in range(pulls):
            sock.send(schema.pack(schema.request("pull", i, group="slow", topic="Big", queue=0, offset=0,
                                                 max=32)))
        peak = before
        watch_until = time.monotonic() + 3  # the reader serves 400 pulls well within this
        while time.monotonic() < watch_until:
            peak = max(peak, reader.memory_info().rss)
            time.sleep(0.02)
        grown_mib = (peak - before) / 2**20
        sock.close(0)
        ctx.term()
        assert grown_mib < 40, f"reader-0 grew by {grown_mib:.0f} MiB for a client that never reads"


@pytest.mark.slow
def test_ack_mode_queues_a_client_opens_are_bounded_by_ack_max_queues(tmp_path: Path) -> None:
    """Every ack-mode pull for a new group opened a queue index (files, an open journal, a turn in
    every tick) with no limit: 3,000 groups from one client stalled reader-0 for over a minute, its
    other clients' pulls timing out. A reader now opens at most [broker] ack_max_queues for clients;
    past it a new one is refused with SERVICE_NOT_AVAILABLE and the open ones are served as before."""
    broker = Broker(tmp_path, broker_extra="ack_max_queues = 3")
    with broker, Producer(broker.store) as producer:
        assert producer.send("Acked", b"m", queue_id=0).ok
        with Admin(broker.store) as admin:  # a queue index opens once its queue is published
            wait_for(lambda: admin.queue_info("Acked").get(0, (0, 0))[1] == 1, 30, "the message published")
        ctx: zmq.Context[object] = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.connect(broker.endpoints().reader(0))

        def ack_pull(group: str) -> dict[str, object]:
            sock.send(schema.pack(schema.request("ack_pull", 1, group=group, topic="Acked", queue=0, consumer="c")))
            assert sock.poll(30_000)
            return schema.unpack(sock.recv())
        try:
            assert [ack_pull(f"g{i}")["ok"] for i in range(3)] == [True] * 3
            refused = ack_pull("g3")
            assert refused["ok"] is False and refused["status"] == "SERVICE_NOT_AVAILABLE"
            assert "ack_max_queues" in str(refused["reason"])
            assert ack_pull("g0")["ok"] is True  # an open queue is served as before
        finally:
            sock.close(0)
            ctx.term()


@pytest.mark.slow
def test_ingress_hwm_bounds_requests_not_replies(tmp_path: Path) -> None:
    """ingress_hwm first bounded the writer's replies too: a producer with more sends in flight than
    the mark (over TCP with CURVE, where replies leave slower) lost replies, its sends timing out
    though stored. Only the inbound side is bounded: the flood waits in the sender."""
    broker = Broker(tmp_path, broker_extra="ingress_hwm = 4", tcp_port=free_port_range(12))
    with broker, Producer(endpoints=broker.endpoints(), timeout_ms=20_000) as producer:
        futures = [producer.send_async("Pipelined", bytes(2000), queue_id=0) for _ in range(400)]
        assert [f.result().status for f in futures] == ["PUT_OK"] * 400
