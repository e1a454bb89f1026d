"""The RocketMQ remoting front against the stock RocketMQ client (``rocketmq`` 0.4.4, C++ 1.2.3 inside),
run in its own processes, and against a raw remoting client for what the stock one lacks."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqstore.ipc.client.api import Admin, Consumer, Producer
from mqstore.ipc.remoting import codec as rm
from mqstore.scripts.bench.rocketmq_peer import body_of, digest
from tests.integration.broker import Broker, free_port_range, wait_for

pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")

ROOT = Path(__file__).resolve().parents[2]
COUNT = 1000
BIG_EVERY = 50  # every 50th body is 5 KiB: the client compresses it


def peer(home: Path, *args: Any, timeout_s: float = 180) -> list[dict[str, Any]]:
    """Run the stock client; its JSON lines."""
    proc = subprocess.run([sys.executable, "-m", "mqstore.scripts.bench.rocketmq_peer", *map(str, args)], cwd=ROOT,
                          env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, str, Path]]:
    root = tmp_path_factory.mktemp("remoting")
    port = free_port_range(1)
    broker = Broker(root, remoting_port=port, commitlog=1024 * 1024, cq=4096,
                    extra_toml="\n[remoting]\nmax_frame_bytes = 1048576\n")
    with broker:
        yield broker, f"127.0.0.1:{port}", root


@pytest.fixture(scope="module")
def produced(front: tuple[Broker, str, Path]) -> list[dict[str, Any]]:
    _, ns, home = front
    return peer(home, "produce", ns, "Stock", COUNT, "--big-every", BIG_EVERY)


@pytest.mark.slow
def test_stock_producer_gets_send_ok_with_distinct_queue_offsets(produced: list[dict[str, Any]]) -> None:
    assert [r["i"] for r in produced] == list(range(COUNT))
    assert {r["status"] for r in produced} == {"OK"}
    assert len({r["msg_id"] for r in produced}) == COUNT
    # the C++ client sends round robin over the route's 4 queues: each counts 0, 1, 2, ... once
    assert Counter(r["offset"] for r in produced) == {o: 4 for o in range(COUNT // 4)}


@pytest.mark.slow
def test_push_consumer_in_a_new_group_receives_everything_once_intact(
        front: tuple[Broker, str, Path], produced: list[dict[str, Any]]) -> None:
    _, ns, home = front
    got = peer(home, "push", ns, "Stock", "CG_push", COUNT, 120)
    ids = Counter(m["id"] for m in got)
    assert not [i for i, n in ids.items() if n > 1], "delivered twice"
    assert set(ids) == {r["msg_id"] for r in produced}
    by_id = {m["id"]: m for m in got}
    for r in produced:
        m = by_id[r["msg_id"]]
        assert (m["keys"], m["tags"], m["digest"]) == (f"key-{r['i']}", f"Tag{r['i'] % 3}", r["digest"])


@pytest.mark.slow
def test_orderly_push_consumer_locks_its_queues_and_takes_each_in_order(
        front: tuple[Broker, str, Path], produced: list[dict[str, Any]]) -> None:
    _, ns, home = front
    got = peer(home, "push", ns, "Stock", "CG_orderly", COUNT, 120, "--orderly")
    assert Counter(m["id"] for m in got) == Counter(r["msg_id"] for r in produced)
    for queue in range(4):
        offsets = [m["offset"] for m in got if m["queue"] == queue]
        assert offsets == sorted(offsets) and len(offsets) == COUNT // 4


@pytest.mark.slow
def test_pull_consumer_reads_every_message(front: tuple[Broker, str, Path], produced: list[dict[str, Any]]) -> None:
    _, ns, home = front
    got = peer(home, "pull", ns, "Stock", "CG_pull")
    assert Counter(m["id"] for m in got) == Counter(r["msg_id"] for r in produced)
    assert {m["digest"] for m in got} == {r["digest"] for r in produced}


@pytest.mark.slow
def test_raw_client_queries_by_key_and_views_by_offset(front: tuple[Broker, str, Path],
                                                       produced: list[dict[str, Any]]) -> None:
    _, ns, _ = front
    host, port = ns.split(":")
    with rm.RemotingClient(host, int(port)) as client:
        # the index builder runs apart: once the last message sent is indexed, every one is
        wait_for(lambda: client.call(rm.QUERY_MESSAGE, {"topic": "Stock", "key": f"key-{COUNT - 1}", "maxNum": 1,
                                                        "beginTimestamp": 0, "endTimestamp": 2 ** 62}).code == 0,
                 30, "the last message to be indexed")
        for i in (0, 7, BIG_EVERY * 3):  # a compressed one among them
            reply = client.call(rm.QUERY_MESSAGE, {"topic": "Stock", "key": f"key-{i}", "maxNum": 32,
                                                   "beginTimestamp": 0, "endTimestamp": 2 ** 62})
            assert reply.code == rm.SUCCESS, reply.remark
            assert int(reply.ext["indexLastUpdatePhyoffset"]) > 0
            hits = [r for r in rm.decode_records(reply.body) if f"key-{i}" in r.keys]
            assert len(hits) == 1 and rm.plain_body(hits[0]) == body_of(i, BIG_EVERY)
            assert hits[0].uniq_key == produced[i]["msg_id"]
            view = client.call(rm.VIEW_MESSAGE_BY_ID, {"offset": hits[0].phys_offset})
            assert view.code == rm.SUCCESS
            assert rm.decode_records(view.body)[0].queue_offset == produced[i]["offset"]
        by_uniq = client.call(rm.QUERY_MESSAGE, {"topic": "Stock", "key": produced[5]["msg_id"], "maxNum": 32,
                                                 "beginTimestamp": 0, "endTimestamp": 2 ** 62,
                                                 "_UNIQUE_KEY_QUERY": "true"})
        assert [r.uniq_key for r in rm.decode_records(by_uniq.body)] == [produced[5]["msg_id"]]
        missing = client.call(rm.QUERY_MESSAGE, {"topic": "Stock", "key": "no-such-key", "maxNum": 32,
                                                 "beginTimestamp": 0, "endTimestamp": 2 ** 62})
        assert missing.code == rm.QUERY_NOT_FOUND
        assert client.call(rm.VIEW_MESSAGE_BY_ID, {"offset": 10 ** 12}).code == rm.SYSTEM_ERROR


@pytest.mark.slow
def test_mqstore_consumer_reads_what_the_stock_producer_sent(front: tuple[Broker, str, Path],
                                                             produced: list[dict[str, Any]]) -> None:
    broker, _, _ = front
    with Consumer(broker.store, group="own", topic="Stock", start="earliest") as consumer:
        got = consumer.messages(COUNT, timeout_ms=30_000)
    assert Counter(m.uniq_key for m in got) == Counter(r["msg_id"] for r in produced)
    i_of = {r["msg_id"]: r["i"] for r in produced}
    for m in got:
        i = i_of[str(m.uniq_key)]
        assert (m.body, m.keys, m.tags) == (body_of(i, BIG_EVERY), (f"key-{i}",), f"Tag{i % 3}")


@pytest.mark.slow
def test_stock_consumers_read_what_the_mqstore_producer_sent(front: tuple[Broker, str, Path]) -> None:
    broker, ns, home = front
    with Producer(broker.store) as producer:
        results = producer.send_batch([{"topic": "Own", "body": f"own-{i}".encode(), "tags": "TagX",
                                        "keys": (f"own-{i}",)} for i in range(200)])
    assert all(r.ok for r in results)
    pulled = peer(home, "pull", ns, "Own", "CG_own_pull")
    pushed = peer(home, "push", ns, "Own", "CG_own_push", 200, 60)
    want = {(str(r.uniq_key), f"own-{i}", "TagX", digest(f"own-{i}".encode())) for i, r in enumerate(results)}
    for got in (pulled, pushed):
        assert len(got) == 200
        assert {(m["id"], m["keys"], m["tags"], m["digest"]) for m in got} == want


@pytest.mark.slow
def test_a_stock_pull_after_a_purge_starts_at_the_floor(front: tuple[Broker, str, Path]) -> None:
    """``mqstore queues purge``: a stock pull consumer of a new group asks from offset 0 and gets only
    what was sent after the purge (the reader starts a pull below a queue's floor at the floor)."""
    broker, ns, home = front

    def send(label: str, count: int) -> None:
        with Producer(broker.store) as producer:
            results = producer.send_batch([{"topic": "Purged", "body": f"{label}-{i}".encode(), "queue_id": i % 4}
                                           for i in range(count)])
        assert all(r.ok for r in results)

    send("before", 40)
    with Admin(broker.store) as admin:
        wait_for(lambda: sum(hi for _, hi in admin.queue_info("Purged").values()) == 40, 30, "the 40 built")
    purge = broker.mqstore("queues", "purge", "Purged")
    assert purge.returncode == 0, purge.stderr
    send("after", 8)
    got = peer(home, "pull", ns, "Purged", "CG_after_purge")
    assert sorted(m["digest"] for m in got) == sorted(digest(f"after-{i}".encode()) for i in range(8))
    assert sorted((m["queue"], m["offset"]) for m in got) == [(q, o) for q in range(4) for o in (10, 11)]


def wait_closed(sock: socket.socket, timeout_s: float = 10) -> None:
    """Returns once the broker closed ``sock``; a timeout (socket.timeout) fails the test."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(65536):
            pass  # a reply before the close is fine; the close is what counts
    except ConnectionResetError:
        pass


@pytest.mark.slow
def test_bad_frames_close_only_their_own_connection(front: tuple[Broker, str, Path]) -> None:
    broker, ns, _ = front
    host, port = ns.split(":")
    restarts_before = broker.status()["actors"]["remoting"]["restarts"]  # type: ignore[index]
    header = json.dumps({"code": rm.HEART_BEAT, "opaque": 1}).encode()
    attacks = {
        "length over max_frame_bytes": struct.pack(">i", 64 * 1024 * 1024) + b"x" * 64,
        "negative length": struct.pack(">i", -5),
        "header length past the frame": struct.pack(">ii", 8, 4000) + b"abcd",
        "header not JSON": struct.pack(">ii", 4 + 9, 9) + b"not json!",
        "header a JSON list": struct.pack(">ii", 4 + 2, 2) + b"[]",
        "unknown serialize type": struct.pack(">ii", 4 + len(header), (7 << 24) | len(header)) + header,
    }
    with rm.RemotingClient(host, int(port)) as good:
        for name, data in attacks.items():
            with socket.create_connection((host, int(port))) as bad:
                bad.sendall(data)
                wait_closed(bad)
            reply = good.call(rm.GET_ROUTEINFO_BY_TOPIC, {"topic": "Stock"})
            assert reply.code == rm.SUCCESS, f"after {name}: {reply.remark}"
        unknown = good.call(4242, {"x": 1})
        assert (unknown.code, unknown.remark) == (rm.REQUEST_CODE_NOT_SUPPORTED, " request type 4242 not supported")
        assert good.call(rm.GET_MAX_OFFSET, {"topic": "Stock", "queueId": 0}).code == rm.SUCCESS
    status = broker.status()
    assert status is not None and status["actors"]["remoting"]["restarts"] == restarts_before
    wait_for(lambda: broker.logs().count("closing 127.0.0.1") >= len(attacks), 10, "a log line per bad frame")


@pytest.mark.slow
def test_killed_front_is_restarted_and_loses_no_acknowledged_send(tmp_path: Path) -> None:
    port = free_port_range(1)
    ns = f"127.0.0.1:{port}"
    with Broker(tmp_path, remoting_port=port, mode="SYNC_FLUSH", commitlog=1024 * 1024, cq=4096) as broker:
        log_path = tmp_path / "sends.jsonl"
        with open(log_path, "w") as out:
            sender = subprocess.Popen([sys.executable, "-m", "mqstore.scripts.bench.rocketmq_peer", "produce", ns,
                                       "Kill",
                                       "0", "--forever"], cwd=ROOT, env={**os.environ, "HOME": str(tmp_path)},
                                      stdout=out, stderr=subprocess.DEVNULL)
        try:
            def oks() -> list[dict[str, Any]]:
                lines = log_path.read_text().splitlines()
                return [json.loads(x) for x in lines[:-1] if '"status"' in x]  # the last line may be partial
            wait_for(lambda: len(oks()) >= 100, 60, "100 sends before the kill")
            old = broker.kill("remoting")
            broker.wait_restarted("remoting", old)
            after_restart = len(oks())
            wait_for(lambda: len(oks()) >= after_restart + 100, 60, "100 sends after the restart")
        finally:
            sender.send_signal(signal.SIGKILL)
            sender.wait()
        acked = oks()
        with Admin(broker.store) as admin:
            for r in acked:
                found = admin.query_by_uniq_key("Kill", r["msg_id"])
                assert found, f"SEND_OK {r} lost"
                assert digest(found[0].body) == r["digest"]
            assert broker.status()["actors"]["remoting"]["restarts"] >= 1  # type: ignore[index]
