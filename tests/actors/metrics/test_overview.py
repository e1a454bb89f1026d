"""The dashboard's totals: per topic (messages held, in, deliveries, the groups reading it), the system
topics summed apart, per group in either mode (lag; ready, unacked, ...), and the broker's version and uptime."""

from __future__ import annotations

import os
from typing import Any

import psutil

from mqstore.actors.metrics.overview import build_info, overview


def _snapshot() -> dict[str, Any]:
    return {
        "time_ms": int(psutil.Process().create_time() * 1000) + 65_000,
        "status": {"pid": os.getpid()},
        "topics": {
            "Orders": {"queue_count": 2, "queues": {"0": [0, 5], "1": [2, 7]}, "messages_in": 12, "messages_out": 30},
            "SCHEDULE_TOPIC_XXXX": {"queue_count": 18, "queues": {"2": [0, 3], "5": [1, 2]}, "messages_in": 4,
                                    "messages_out": 4},
            "%DLQ%Acks": {"queue_count": 1, "queues": {"0": [0, 1]}, "messages_in": 1, "messages_out": 0},
            "Empty": {"queue_count": 4, "queues": {}, "messages_in": 0, "messages_out": 0}},
        "groups": {"G": [{"topic": "Orders", "queue": 0, "committed_offset": 2, "lag": 3},
                         {"topic": "Orders", "queue": 1, "committed_offset": -1, "lag": 5}]},
        "ack": [{"group": "A", "topic": "Orders", "queue": 0, "ready": 4, "unacked": 1, "redelivered": 2, "dead": 0},
                {"group": "A", "topic": "Orders", "queue": 1, "ready": 5, "unacked": 0, "redelivered": 0, "dead": 1},
                {"group": "G", "topic": "Orders", "queue": 1, "ready": 1, "unacked": 1, "redelivered": 0, "dead": 0}],
        "delivered": {"G": {"Orders": 7, "Other": 2}, "A": {"Orders": 3}},
    }


def test_topics_are_summed_over_their_queues_and_the_system_ones_apart() -> None:
    got = overview(_snapshot())
    orders = got["topics"]["Orders"]
    assert orders == {"system": False, "queues": 2, "messages": 10, "max_offset": 12, "messages_in": 12,
                      "messages_out": 30, "groups": ["A", "G"]}
    assert got["topics"]["Empty"]["queues"] == 4 and got["topics"]["Empty"]["messages"] == 0
    assert [t for t, info in got["topics"].items() if info["system"]] == ["SCHEDULE_TOPIC_XXXX", "%DLQ%Acks"]
    assert got["system_topics"] == {"topics": 2, "queues": 19, "messages": 5, "max_offset": 6, "messages_in": 5,
                                    "messages_out": 4}


def test_groups_are_summed_per_mode_and_a_count_not_of_their_mode_is_none() -> None:
    groups = overview(_snapshot())["groups"]
    assert groups["G"] == {"mode": "offset+ack", "topics": ["Orders"], "queues": 2, "lag": 8, "never": 1, "ready": 1,
                           "unacked": 1, "redelivered": 0, "dead": 0, "delivered": 9}
    assert groups["A"] == {"mode": "ack", "topics": ["Orders"], "queues": 2, "lag": None, "never": None, "ready": 9,
                           "unacked": 1, "redelivered": 2, "dead": 1, "delivered": 3}


def test_each_group_counts_what_it_was_delivered_not_every_groups_together() -> None:
    """Two groups reading the same 12 messages: each its own figure, none the sum over groups."""
    snapshot = {**_snapshot(), "delivered": {"G": {"Orders": 12}, "A": {"Orders": 12}}}
    groups = overview(snapshot)["groups"]
    assert (groups["G"]["delivered"], groups["A"]["delivered"]) == (12, 12)
    assert overview({**_snapshot(), "delivered": {}})["groups"]["G"]["delivered"] == 0


def test_the_broker_started_when_its_supervisor_did() -> None:
    broker = overview(_snapshot())["broker"]
    assert broker["started_ms"] == int(psutil.Process().create_time() * 1000)
    assert broker["uptime_s"] == 65
    assert broker["version"] == build_info()["version"] != ""
    gone = overview({**_snapshot(), "status": {}})["broker"]
    assert "uptime_s" not in gone and gone["version"] == broker["version"]


def test_an_empty_collection_has_no_overview() -> None:
    assert overview({}) == {}
