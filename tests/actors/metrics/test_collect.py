"""The metrics collection asks the per-topic and per-group sources only when something moved: on an idle
broker its cost does not grow with the topics and groups."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import zmq

from mqstore.actors.config import load_config
from mqstore.actors.metrics import collect as collect_module
from mqstore.actors.metrics.collect import Collector

STATUS: dict[str, Any] = {"written": 1000, "flushed": 1000, "actors": {
    "writer": {"pid": 10, "state": "running", "topics_in": {"T0": [3, 300]}},
    "cqbuilder": {"pid": 11, "state": "running", "applied": 1000},
    "reader-0": {"pid": 12, "state": "running", "readable_end": 1000, "topics_out": {}, "commits": 0,
                 "ack_queues": 0}}}


class CountingAdmin:
    """The collector's admin, counting what it is asked."""

    def __init__(self, groups: int) -> None:
        self.asked: dict[str, int] = {}
        self.group_names = {f"g{i}": ["T0"] for i in range(groups)}

    def _count(self, op: str) -> None:
        self.asked[op] = self.asked.get(op, 0) + 1

    def topics(self) -> dict[str, int]:
        self._count("topics")
        return {"T0": 1, "T1": 1}

    def queue_info(self, topic: str) -> dict[int, tuple[int, int]]:
        self._count("queue_info")
        return {0: (0, 3)}

    def groups(self) -> dict[str, list[str]]:
        self._count("groups")
        return self.group_names

    def group_describe(self, group: str) -> list[Any]:
        self._count("group_describe")
        return []

    def ack_stats(self) -> list[Any]:
        self._count("ack_stats")
        return []

    def close(self) -> None:
        pass


def collector(tmp_path: Path, status: dict[str, Any], groups: int) -> tuple[Collector, CountingAdmin]:
    ctx: zmq.Context[Any] = zmq.Context.instance()
    made = Collector(load_config(tmp_path / "store"), ctx)
    made.admin.close()
    admin = CountingAdmin(groups)
    made.admin = admin  # type: ignore[assignment]
    made._supervisor_status = lambda: status  # type: ignore[method-assign]
    return made, admin


def test_an_idle_broker_is_not_asked_for_every_group_each_collection(tmp_path: Path) -> None:
    status = copy.deepcopy(STATUS)
    made, admin = collector(tmp_path, status, groups=50)
    made.collect()
    assert admin.asked["group_describe"] == 50 and admin.asked["queue_info"] == 2
    for _ in range(5):  # nothing moved: the status and the topics only
        snapshot = made.collect()
    assert admin.asked == {"topics": 6, "queue_info": 2, "groups": 1, "group_describe": 50, "ack_stats": 1}
    assert not made.moved and len(snapshot["groups"]) == 50  # the last answers still served


def test_a_commit_a_message_or_a_new_topic_asks_again(tmp_path: Path) -> None:
    status = copy.deepcopy(STATUS)
    made, admin = collector(tmp_path, status, groups=3)
    made.collect()
    status["actors"]["reader-0"]["commits"] = 1  # an offset committed: the groups' lag moved
    made.collect()
    assert made.moved and admin.asked["group_describe"] == 6
    assert admin.asked["queue_info"] == 2  # a commit moves the groups' lag, not the queues
    status["actors"]["writer"]["topics_in"]["T0"] = [4, 400]  # a message into T0: its queues asked
    status["written"] = 1100
    made.collect()
    assert admin.asked["queue_info"] == 3
    status["actors"]["reader-0"]["readable_end"] = 1100  # and again once reader 0 shows it
    made.collect()
    assert admin.asked["queue_info"] == 4
    made.collect()
    assert not made.moved and admin.asked["queue_info"] == 4


def test_a_move_asks_only_the_topics_whose_messages_moved_and_the_groups_on_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deltas, not full listings: messages into T1 ask T1's queues again and describe the groups
    that consume T1, while the other topics' and groups' last answers stay served; a reader catching
    up later (its readable end) asks T1 again, not every topic."""
    clock = [1_000_000]
    monkeypatch.setattr(collect_module, "monotonic_ms", lambda: clock[0])
    status = copy.deepcopy(STATUS)
    made, admin = collector(tmp_path, status, groups=40)
    admin.group_names["on-t1"] = ["T1"]
    made.collect()
    made.collect()
    asked = dict(admin.asked)
    status["actors"]["writer"]["topics_in"] = {"T0": [3, 300], "T1": [1, 100]}
    status["written"] = 1100
    snapshot = made.collect()
    assert admin.asked["queue_info"] - asked["queue_info"] == 1  # T1
    assert admin.asked["group_describe"] - asked["group_describe"] == 1  # on-t1
    assert len(snapshot["groups"]) == 41 and set(snapshot["topics"]) == {"T0", "T1"}
    status["actors"]["reader-0"]["readable_end"] = 1100
    made.collect()
    assert admin.asked["queue_info"] - asked["queue_info"] == 2


def test_a_move_no_topic_explains_asks_every_topic(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A slave's log grows without the writer (no counts per topic): every topic is asked."""
    clock = [1_000_000]
    monkeypatch.setattr(collect_module, "monotonic_ms", lambda: clock[0])
    status = copy.deepcopy(STATUS)
    made, admin = collector(tmp_path, status, groups=1)
    made.collect()
    made.collect()
    status["written"] = 5000
    made.collect()
    assert admin.asked["queue_info"] == 4
    status["actors"]["cqbuilder"]["applied"] = 5000  # the builder catching up: nothing new to show yet
    made.collect()
    assert admin.asked["queue_info"] == 4
    status["actors"]["reader-0"]["readable_end"] = 5000  # reader 0 shows the log that far: every topic again
    made.collect()
    made.collect()
    assert admin.asked["queue_info"] == 6


def test_retention_moving_a_builder_asks_the_queues_again(tmp_path: Path) -> None:
    """A queue's first offset moves when retention deletes files: the builders' first offset shows it,
    so the queues need no refresh every minute in case it happened."""
    status = copy.deepcopy(STATUS)
    status["actors"]["cqbuilder"]["retained_from"] = 0
    made, admin = collector(tmp_path, status, groups=3)
    made.collect()
    status["actors"]["cqbuilder"]["retained_from"] = 4096
    made.collect()
    assert made.moved and admin.asked["queue_info"] == 4


def test_past_a_minute_of_nothing_moving_only_the_ack_queues_are_asked(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The ack queues move as visibility timeouts pass, which no stat shows: one request a reader,
    every ``ACK_REFRESH_MS``; the queues and groups (a request each) wait for the safety net."""
    clock = [1_000_000]
    monkeypatch.setattr(collect_module, "monotonic_ms", lambda: clock[0])
    made, admin = collector(tmp_path, copy.deepcopy(STATUS), groups=50)
    made.collect()
    made.collect()
    clock[0] += collect_module.ACK_REFRESH_MS
    made.collect()
    assert admin.asked == {"topics": 3, "queue_info": 2, "groups": 1, "group_describe": 50, "ack_stats": 2}
    clock[0] += collect_module.FULL_REFRESH_MS
    made.collect()
    assert admin.asked["group_describe"] == 100 and admin.asked["ack_stats"] == 3


def test_topics_made_in_bulk_are_not_asked_again_at_every_move_for_a_minute(tmp_path: Path) -> None:
    """Two hundred topics made with a message each are asked as they appear, then once reader 0 shows
    their messages; later moves of one topic ask that topic alone (its queues were asked at every
    collection with a move for a minute: 200 requests each)."""
    status = copy.deepcopy(STATUS)
    made, admin = collector(tmp_path, status, groups=0)
    made.collect()
    made.collect()
    base = admin.asked["queue_info"]
    topics = {f"B{i:03}": 1 for i in range(200)}
    admin.topics = lambda: {"T0": 1, "T1": 1, **topics}  # type: ignore[method-assign]
    status["actors"]["writer"]["topics_in"] = {"T0": [3, 300], **{t: [1, 100] for t in topics}}
    status["written"] = 21_000
    made.collect()  # new, and moved: asked once
    status["actors"]["reader-0"]["readable_end"] = 21_000
    made.collect()  # reader 0 shows their messages: asked again, then settled
    assert admin.asked["queue_info"] - base == 400
    for i in range(10):  # one topic moving at a time
        status["actors"]["writer"]["topics_in"]["T0"] = [4 + i, 400 + i * 100]
        status["written"] = status["actors"]["reader-0"]["readable_end"] = 21_100 + i * 100
        made.collect()
    assert admin.asked["queue_info"] - base == 410
