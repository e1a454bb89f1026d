"""Topics made in bulk cost the metrics collection their own ask, not one at every collection for a
minute: on a real broker, once a hundred fresh topics were each asked, one topic moving again and
again has reader 0 asked for that topic's queues alone (every topic that moved within the minute
was asked again at each move: a hundred requests a collection). Counted by the requests the
metrics actor reports it made, never timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqstore.ipc.client.api import Admin, Producer
from tests.integration.broker import Broker, free_port_range, wait_for

TOPICS = 100
MOVES = 10


def _asked(broker: Broker) -> int:
    """The metrics actor's count of queue_info requests (0 before its first report)."""
    status: dict[str, Any] = wait_for(broker.status, 30, "the supervisor's status")
    return int(status["actors"].get("metrics", {}).get("asked", {}).get("queue_info", 0))


@pytest.mark.slow
def test_topics_made_in_bulk_are_asked_for_their_own_moves_only(tmp_path: Path) -> None:
    port = free_port_range(1)
    broker = Broker(tmp_path, metrics_port=port, extra_toml="\n[metrics]\ncollect_interval_ms = 200\n")
    with broker, Admin(broker.store) as admin, Producer(broker.store) as producer:
        for t in range(TOPICS):
            admin.create_topic(f"Bulk{t}", 1)
            assert producer.send(f"Bulk{t}", b"one").ok
        wait_for(lambda: _asked(broker) >= TOPICS, 60, "the metrics actor to ask every new topic")
        start = _asked(broker)
        for i in range(MOVES):  # one topic moving, each move seen by a collection before the next
            before = _asked(broker)
            assert producer.send("Bulk0", f"again-{i}".encode()).ok
            wait_for(lambda b=before: _asked(broker) > b, 60, "a collection to ask the topic that moved")
        moved = _asked(broker) - start
    # each move asks the topic that moved, and again as reader 0 catches up with it: never the others
    assert moved <= 3 * MOVES, moved
