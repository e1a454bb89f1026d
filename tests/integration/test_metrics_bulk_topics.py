"""Topics made in bulk cost the metrics collection their own asks, not one at every collection for a
minute: on a real broker, a hundred fresh topics each asked as they appear, at their message and
once reader 0 shows it, then one topic moving again and again has reader 0 asked for that topic's
queues alone (every topic that moved within the minute was asked again at each move: a hundred
requests a collection). Counted by the requests the metrics actor reports it made, never timed."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mqstore.ipc.client.api import Admin, Producer
from tests.integration.broker import Broker, free_port_range, wait_for

TOPICS = 100
MOVES = 10


def _asked(broker: Broker, port: int) -> int:
    """The metrics actor's count of queue_info requests (0 before its first report). A page is read
    first: a collection nobody reads waits 5 s, a watched one ``collect_interval_ms``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=10) as response:
        response.read()
    status: dict[str, Any] = wait_for(broker.status, 30, "the supervisor's status")
    return int(status["actors"].get("metrics", {}).get("asked", {}).get("queue_info", 0))


@pytest.mark.slow
def test_topics_made_in_bulk_are_asked_for_their_own_moves_only(tmp_path: Path) -> None:
    port = free_port_range(1)
    broker = Broker(tmp_path, metrics_port=port, extra_toml="\n[metrics]\ncollect_interval_ms = 200\n")
    with broker, Admin(broker.store) as admin, Producer(broker.store) as producer:
        start = _asked(broker, port)
        for t in range(TOPICS):
            admin.create_topic(f"Bulk{t}", 1)
            assert producer.send(f"Bulk{t}", b"one").ok
        for i in range(MOVES):  # one topic moving, each move seen by a collection before the next
            before = _asked(broker, port)
            assert producer.send("Bulk0", f"again-{i}".encode()).ok
            wait_for(lambda b=before: _asked(broker, port) > b, 60, "a collection to ask the topic that moved")
        asked = _asked(broker, port) - start
    # each topic: as it appears, at its message, once reader 0 shows it; each move: the topic, twice
    assert TOPICS <= asked <= 3 * TOPICS + 2 * MOVES, asked
