"""Retention's ``reclaim_consumed`` through a real broker: commitlog files every group consumed go
within a few cleanup rounds, a group that has not consumed (or an unacked message, or a topic no
group consumes) holds them, a commit the reader has not persisted holds them across a SIGKILL, the
writer's status says per file what holds it, and ``mqstore verify`` stays clean.

64 KiB commitlog files and 1 KiB bodies: about 60 messages fill a file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Producer
from tests.integration.broker import Broker, free_port_range, wait_for

FILE_SIZE = 64 * 1024
COUNT = 400   # about seven files
ROUNDS = 5    # cleanup rounds watched before a file that must stay is checked
ROOT = Path(__file__).resolve().parents[2]


def _broker(tmp_path: Path, *, reclaim: bool = True, persist_ms: int = 100, metrics_port: int | None = None) -> Broker:
    return Broker(tmp_path, commitlog=FILE_SIZE, metrics_port=metrics_port,
                  broker_extra=f"clean_interval_ms = 100\noffset_persist_interval_ms = {persist_ms}",
                  extra_toml=f"\n[retention]\nreclaim_consumed = {'true' if reclaim else 'false'}\n")


def _body(i: int) -> bytes:
    return f"{i:06d}".encode() * 170


def _produce(producer: Producer, topic: str, count: int = COUNT, start: int = 0) -> None:
    for first in range(start, start + count, 50):
        batch = [{"topic": topic, "body": _body(i), "queue_id": 0}
                 for i in range(first, min(start + count, first + 50))]
        assert all(r.ok for r in producer.send_batch(batch))


def _files(broker: Broker) -> list[int]:
    return sorted(int(p.name) for p in (broker.store / "commitlog").iterdir() if p.name.isdigit())


def _writer(broker: Broker) -> dict[str, Any]:
    status = broker.status()
    assert status is not None
    return dict(status["actors"]["writer"])


def _persisted(broker: Broker, key: str) -> bool:
    path = broker.store / "config" / "consumerOffset.json"
    return path.exists() and key in path.read_text()  # a reading between the two renames: asked again


def _rounds_pass(broker: Broker, count: int = ROUNDS) -> None:
    """Wait until the writer has run ``count`` cleanup rounds that began after this call. Its status
    comes in reports a while apart: the first report newer than the one seen now was made after this
    call, so the rounds it counts from there on all read what this call's caller had written."""
    def rounds() -> int:
        return int(_writer(broker).get("reclaim_rounds", 0))
    seen = rounds()
    fresh = wait_for(lambda: (r := rounds()) > seen and r, 30, "a new writer report")
    wait_for(lambda: rounds() >= fresh + count, 30, "cleanup rounds")


def _consume_all(broker: Broker, group: str, topic: str, count: int = COUNT) -> list[Any]:
    with Consumer(broker.store, group=group, topic=topic, queues=[0], auto_commit=False) as consumer:
        got = consumer.messages(count, timeout_ms=20_000)
        consumer.commit()
    assert len(got) == count
    return got


def _ack_all(broker: Broker, group: str, topic: str, count: int = COUNT) -> None:
    acked = 0
    with AckConsumer(broker.store, group=group, topic=topic, queues=[0], visibility_ms=120_000) as consumer:
        while acked < count:
            batch = consumer.receive(256, timeout_ms=5000)
            assert batch, f"only {acked} of {count} delivered"
            assert set(consumer.ack(batch)) == {"OK"}
            acked += len(batch)


def _verify(broker: Broker) -> None:
    done = subprocess.run([sys.executable, "-m", "mqstore.scripts.cli.mqstore", "verify", str(broker.store)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_consumed_files_go_once_every_group_consumed_them(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    with broker, Producer(broker.store) as producer:
        _produce(producer, "Both")
        files = _files(broker)
        assert len(files) >= 5
        with AckConsumer(broker.store, group="Acks", topic="Both", queues=[0], visibility_ms=120_000) as held:
            unacked = held.receive(3, timeout_ms=5000)
            assert unacked and unacked[0].queue_offset == 0
            _consume_all(broker, "Offsets", "Both")
            wait_for(lambda: _persisted(broker, "Both@Offsets"), 10, "the offsets persisted")
            _rounds_pass(broker)
            assert _files(broker) == files  # the ack-mode group holds the first file, so every file stays
            first = _writer(broker)["files"][0]
            assert (first["file"], first["state"]) == (0, "held")
            holders = {(h["kind"], h["group"]): h["messages"] for h in first["held_by"]}
            assert set(holders) == {("ack", "Acks")} and holders[("ack", "Acks")] >= len(unacked)
            assert _writer(broker)["files"][-1]["state"] == "newest"
            shown = broker.mqstore("status")
            assert shown.returncode == 0 and f"{0:020d}" in shown.stdout and "ack Acks Both/0" in shown.stdout
            assert set(held.ack(unacked)) == {"OK"}
        _ack_all(broker, "Acks", "Both", COUNT - len(unacked))
        wait_for(lambda: _files(broker) == files[-1:], 20, "every consumed file to go")
        wait_for(lambda: [f["state"] for f in _writer(broker)["files"]] == ["newest"], 10, "the status to say so")
        assert broker.stop() == 0
    _verify(broker)


def test_a_group_that_has_not_consumed_holds_the_files_in_the_status_and_the_metrics(tmp_path: Path) -> None:
    port = free_port_range(1)
    broker = _broker(tmp_path, metrics_port=port)
    with broker, Producer(broker.store) as producer:
        _produce(producer, "Idle")
        files = _files(broker)
        with Admin(broker.store) as admin:
            admin.commit_offset("Idle", "Idle", 0, 0)  # the group exists, and has consumed nothing
        _consume_all(broker, "Busy", "Idle")
        wait_for(lambda: _persisted(broker, "Idle@Busy"), 10, "the offsets persisted")
        _rounds_pass(broker)
        assert _files(broker) == files
        first = _writer(broker)["files"][0]
        assert [(h["kind"], h["group"], h["topic"], h["queue"]) for h in first["held_by"]] == [
            ("offset", "Idle", "Idle", 0)]
        held = first["held_by"][0]["messages"]
        as_json = json.loads(broker.mqstore("status", "--json").stdout)["actors"]["writer"]["files"][0]["held_by"]
        assert [(h["kind"], h["group"], h["topic"], h["queue_id"]) for h in as_json] == [("offset", "Idle", "Idle", 0)]
        sample = (f'mqstore_commitlog_file_held_messages{{file="{0:020d}",group="Idle",kind="offset",queue="0",'
                  f'topic="Idle"}} {float(held)}')

        def scraped() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                return sample in response.read().decode()
        wait_for(scraped, 20, f"the metrics to show {sample}")
        assert broker.stop() == 0


def test_nothing_is_reclaimed_when_it_is_off(tmp_path: Path) -> None:
    broker = _broker(tmp_path, reclaim=False)
    with broker, Producer(broker.store) as producer:
        _produce(producer, "Off")
        files = _files(broker)
        _consume_all(broker, "Offsets", "Off")
        _ack_all(broker, "Acks", "Off")
        _rounds_pass(broker)
        assert _files(broker) == files
        assert {f["state"] for f in _writer(broker)["files"][:-1]} == {"retention"}
        assert broker.stop() == 0


def test_a_topic_no_group_consumes_holds_its_files_until_one_does(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    with broker, Producer(broker.store) as producer:
        _produce(producer, "Lonely", 100)
        _produce(producer, "Busy", 300, start=100)
        files = _files(broker)
        _consume_all(broker, "Offsets", "Busy", 300)
        _rounds_pass(broker)
        assert _files(broker) == files
        first = _writer(broker)["files"][0]
        assert [(h["kind"], h["group"], h["topic"]) for h in first["held_by"]] == [("no group", "", "Lonely")]
        assert first["held_by"][0]["messages"] > 50  # the first file is all Lonely's
        _consume_all(broker, "Late", "Lonely", 100)
        wait_for(lambda: _files(broker) == files[-1:], 20, "the files to go once the topic's group consumed it")
        assert broker.stop() == 0
    _verify(broker)


def test_a_commit_not_persisted_holds_its_files_across_a_reader_sigkill(tmp_path: Path) -> None:
    """The reader persists offsets only at stop here: the commit after the restart is in its memory
    alone when it is killed, so the files it covers stay and the restarted consumer reads them again."""
    broker = _broker(tmp_path, persist_ms=3_600_000)
    with broker, Producer(broker.store) as producer:
        _produce(producer, "Kept")
        with Consumer(broker.store, group="G", topic="Kept", queues=[0], auto_commit=False) as consumer:
            assert len(consumer.messages(100, timeout_ms=20_000)) == 100
            consumer.commit()
        assert broker.stop() == 0  # persists offset 100
    with broker:
        wait_for(lambda: _files(broker)[0] > 0, 20, "the file below offset 100 to go")
        kept = _files(broker)
        assert len(kept) >= 5
        _consume_all(broker, "G", "Kept", COUNT - 100)  # committed in memory only
        _rounds_pass(broker)
        assert _files(broker) == kept
        broker.wait_restarted("reader-0", broker.kill("reader-0"))
        with Consumer(broker.store, group="G", topic="Kept", queues=[0], auto_commit=False) as consumer:
            again = consumer.messages(COUNT - 100, timeout_ms=20_000)
        assert [m.queue_offset for m in again] == list(range(100, COUNT))
        assert [m.body for m in again] == [_body(i) for i in range(100, COUNT)]
        assert _files(broker) == kept
        assert broker.stop() == 0
    _verify(broker)
