"""The metrics actor on a real broker: /metrics scraped and parsed with prometheus_client's parser
against what producers and consumers really did and what the store holds; a scraper that hangs does
not stop sends; a killed metrics actor comes back; bad requests are 4xx and it keeps serving."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mqstore.actors.metrics.listener import MAX_CONNECTIONS
from mqstore.engine import MessageStore
from mqstore.ipc.client.ack_consumer import AckConsumer
from mqstore.ipc.client.api import Admin, Consumer, Producer
from tests.integration.broker import Broker, free_port_range, wait_for

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int, path: str = "/metrics") -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        body: bytes = response.read()
        return body


def samples(port: int) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(scrape(port).decode()) for s in family.samples}


def value(got: Samples, name: str, **labels: str) -> float | None:
    return got.get((name, tuple(sorted(labels.items()))))


def _send(store: Path, topic: str, count: int) -> None:
    with Producer(store) as producer:
        results = producer.send_batch([{"topic": topic, "body": f"{topic}-{i}".encode()} for i in range(count)])
    assert all(r.ok for r in results), results


@pytest.mark.slow
def test_a_scrape_shows_what_was_sent_consumed_and_left_unacked(tmp_path: Path) -> None:
    port = free_port_range(1)
    with Broker(tmp_path, mode="SYNC_FLUSH", readers=2, metrics_port=port) as broker:
        with Admin(broker.store) as admin:
            admin.create_topic("Lag", 1)
            admin.create_topic("Acked", 1)
        _send(broker.store, "Orders", 30)
        _send(broker.store, "Lag", 10)
        _send(broker.store, "Acked", 10)
        with Consumer(broker.store, group="G", topic="Lag", start="earliest", long_poll_ms=100) as consumer:
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < 4 and time.monotonic() < deadline:
                got += consumer.poll(500, max_count=4 - len(got))
            consumer.commit()
        assert len(got) == 4
        with Consumer(broker.store, group="Part", topic="Orders", queues=[0], start="earliest",
                      long_poll_ms=100) as partial:  # commits on queue 0 of Orders' four, never on the others
            deadline = time.monotonic() + 30
            while not partial.poll(500, max_count=2) and time.monotonic() < deadline:
                pass
            partial.commit()
        with AckConsumer(broker.store, group="A", topic="Acked", prefetch=3) as acked:
            held: list[Any] = []
            deadline = time.monotonic() + 30
            while len(held) < 3 and time.monotonic() < deadline:
                held += acked.receive(3 - len(held), 500)
            assert len(held) == 3  # fetched, never acked

            def settled() -> Samples | None:
                s = samples(port)
                lag = value(s, "mqstore_group_lag_messages", group="G", topic="Lag", queue="0")
                unacked = value(s, "mqstore_ack_unacked_messages", group="A", topic="Acked", queue="0")
                written = value(s, "mqstore_commitlog_written_offset")
                flushed = value(s, "mqstore_commitlog_flushed_offset")
                inn = [value(s, "mqstore_topic_messages_in_total", topic=t) for t in ("Orders", "Lag", "Acked")]
                # a reader's counts come with its reports, at most one a stats interval: polled for too
                out = [value(s, "mqstore_topic_messages_out_total", topic=t) or 0 for t in ("Lag", "Acked")]
                part = value(s, "mqstore_group_committed_offset", group="Part", topic="Orders", queue="0")
                return s if (lag == 6 and unacked == 3 and part and inn == [30, 10, 10] and written
                             and written == flushed and out[0] >= 4 and out[1] >= 3) else None

            s = wait_for(settled, 30, "the scrape to show the sends, the commit and the unacked fetch")
        assert value(s, "mqstore_group_committed_offset", group="G", topic="Lag", queue="0") == 4
        # no sentinel series: a queue the group never committed on has its lag and nothing else
        part = {q: (value(s, "mqstore_group_committed_offset", group="Part", topic="Orders", queue=q),
                    value(s, "mqstore_group_last_consume_timestamp_seconds", group="Part", topic="Orders", queue=q),
                    value(s, "mqstore_group_lag_messages", group="Part", topic="Orders", queue=q))
                for q in "0123"}
        assert all(c is not None and c > 0 and t is not None and t > 0 for c, t, _ in [part["0"]]), part
        for q in "123":
            assert part[q][:2] == (None, None) and part[q][2] == value(s, "mqstore_queue_max_offset", topic="Orders",
                                                                       queue=q), part
        assert all(v >= 0 for v in s.values())
        build = [labels for name, labels in s if name == "mqstore_build_info"]
        assert build == [(("python", platform.python_version()),
                          ("version", importlib.metadata.version("mqstore")))]
        assert value(s, "mqstore_build_info", **dict(build[0])) == 1
        started = value(s, "mqstore_broker_start_time_seconds")
        assert started == psutil.Process(broker.status()["pid"]).create_time()
        assert value(s, "mqstore_ack_ready_messages", group="A", topic="Acked", queue="0") == 7
        assert value(s, "mqstore_ack_redelivered_total", group="A", topic="Acked", queue="0") == 0
        assert sum(value(s, "mqstore_queue_max_offset", topic="Orders", queue=str(q)) or 0 for q in range(4)) == 30
        assert value(s, "mqstore_queue_max_offset", topic="Lag", queue="0") == 10
        assert (value(s, "mqstore_topic_messages_out_total", topic="Lag") or 0) >= 4
        assert value(s, "mqstore_topic_messages_out_total", topic="Acked") == 3  # the ack-mode deliveries
        # three send requests, each held for its flush and counted once, when answered
        assert value(s, "mqstore_send_latency_seconds_count") == 3
        written = value(s, "mqstore_commitlog_written_offset")
        bytes_in = sum(value(s, "mqstore_topic_bytes_in_total", topic=t) or 0 for t in ("Orders", "Lag", "Acked"))
        assert written == bytes_in  # every record appended is a topic's
        # G's pulls may all have been parked (asked before the reader knew the records); another group's
        # pull of the same queue now finds them at once, which is what the pull latency histogram counts
        with Consumer(broker.store, group="P", topic="Lag", start="earliest", long_poll_ms=100) as again:
            deadline = time.monotonic() + 30
            while not again.poll(500, max_count=1) and time.monotonic() < deadline:
                pass
        wait_for(lambda: (value(samples(port), "mqstore_pull_latency_seconds_count") or 0) >= 1, 30,
                 "a pull answered at once in the pull latency histogram")
        for actor in ("writer", "flusher", "cqbuilder", "indexbuilder", "reader-0", "reader-1", "metrics"):
            assert value(s, "mqstore_actor_up", actor=actor) == 1
            assert value(s, "mqstore_actor_state", actor=actor, state="running") == 1
            assert (value(s, "mqstore_actor_cpu_seconds_total", actor=actor) or 0) > 0
        assert 0 < (value(s, "mqstore_disk_used_ratio") or 0) <= 1
        assert value(s, "mqstore_disk_warning_ratio") == 0.9

        status = json.loads(broker.mqstore("status", "--json").stdout)
        assert status["metrics_url"] == f"http://127.0.0.1:{port}/"
        assert f"dashboard at http://127.0.0.1:{port}/, Prometheus metrics at http://127.0.0.1:{port}/metrics" \
            in broker.logs()
        assert broker.stop() == 0
    with MessageStore.open(broker.store) as store:
        assert store.commitlog.max_offset == written  # what the scrape said the writer had appended


def _hang(port: int, asks: bool) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    if asks:  # and never reads the answer
        sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    return sock


def _listen_on(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    sock.listen()
    return True


def _status_of(port: int, request: bytes) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        return int(sock.makefile("rb").readline().split()[1])


@pytest.mark.slow
def test_hung_scrapers_do_not_stop_sends_bad_requests_are_4xx_and_a_killed_metrics_actor_comes_back(
        tmp_path: Path) -> None:
    port = free_port_range(1)
    with Broker(tmp_path, metrics_port=port) as broker:
        hung = [_hang(port, asks=i % 2 == 0) for i in range(MAX_CONNECTIONS + 8)]
        try:
            with Producer(broker.store) as producer:
                for start in range(0, 2000, 100):
                    results = producer.send_batch([{"topic": "Hung", "body": f"m{i}".encode()}
                                                   for i in range(start, start + 100)])
                    assert all(r.ok for r in results), results
        finally:
            for sock in hung:
                sock.close()

        def answers() -> Samples | None:
            try:
                s = samples(port)
            except OSError:
                return None
            return s if value(s, "mqstore_topic_messages_in_total", topic="Hung") == 2000 else None

        wait_for(answers, 30, "the metrics to answer again and count every send")

        for request, code in ((b"GET /nope HTTP/1.0\r\n\r\n", 404), (b"POST /metrics HTTP/1.0\r\n\r\n", 405),
                              (b"garbage\r\n\r\n", 400), (b"GET /metrics HTTP/7.0\r\n\r\n", 400)):
            assert _status_of(port, request) == code
        assert scrape(port).startswith(b"# HELP mqstore_")

        pid = broker.kill("metrics")
        # the port taken while the actor restarts (it needs far longer to start than the port to free)
        taken = socket.socket()
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the scrapes' TIME_WAITs
        wait_for(lambda: _listen_on(taken, port), 30, "the killed actor's port to free")
        try:
            broker.wait_restarted("metrics", pid)

            def not_listening() -> bool:
                status = broker.status()
                return status is not None and status["actors"]["metrics"].get("listening") is False

            wait_for(not_listening, 30, "the restarted metrics actor to run without its port")
        finally:
            taken.close()

        def restarted() -> bool:
            try:
                return value(samples(port), "mqstore_actor_restarts_total", actor="metrics") == 1
            except (OSError, urllib.error.URLError):
                return False

        wait_for(restarted, 30, "the restarted metrics actor to bind once the port is free, and serve")
        assert broker.status()["actors"]["metrics"]["restarts_total"] == 1  # it kept running meanwhile
        assert broker.stop() == 0
