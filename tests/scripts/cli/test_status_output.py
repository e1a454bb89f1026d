"""``mqstore status`` on a replicated broker, from status replies written by hand: the replication
lines under the actors' table, the master's slaves with their lag, and ``--json``'s summary."""

from __future__ import annotations

from typing import Any

import pytest

from mqstore.actors.ha_status import replication_summary
from mqstore.scripts.cli.output import print_status, replication_lines, slave_rows, status_json
from tests.actors.metrics.test_replication_metrics import MASTER, NOW_MS, SLAVE


def _reply(status: dict[str, Any]) -> dict[str, Any]:
    return {"store": "/s", "pid": 7, "flush_mode": "ASYNC_FLUSH", "written": 5000, "flushed": 5000,
            "metrics_url": None, **status}


def test_a_master_shows_its_port_its_slaves_and_each_ones_lag() -> None:
    rep = replication_summary(MASTER, NOW_MS)
    assert rep is not None
    assert replication_lines(rep) == [
        "replication: SYNC_MASTER, epoch 3, HA port 127.0.0.1:10912, 2 slaves connected (1 in sync), replicated "
        "to 4000 of 5000"]
    assert slave_rows(rep) == [(1, "127.0.0.1:50001", 5000, 0, "0.0", "0.2"),
                               (2, "127.0.0.1:50002", 4000, 1000, "1.5", "3.0")]


def test_a_slave_shows_its_master_its_state_and_its_metadata() -> None:
    rep = replication_summary(SLAVE, NOW_MS)
    assert rep is not None
    assert replication_lines(rep) == [
        "replication: SLAVE of 127.0.0.1:10912, epoch 3, transfer; written 4000, the master's end 5000 as last "
        "learned (1000 bytes behind), heard from it 0.1 s ago",
        "metadata: from 127.0.0.1:10911, synced 2.5 s ago; not applied: delay_offsets (error: boom); ack_marks "
        "(never)"]
    assert slave_rows(rep) == []


def test_a_slave_that_does_not_follow_says_why_and_a_dead_ha_actor_is_named() -> None:
    ha = {**SLAVE["actors"]["ha"], "state": "dead (exit 1), restart in 100 ms", "ha_state": "diverged",
          "reason": "no epoch of this log is one of the master's", "since_master_ms": -1}
    rep = replication_summary({"role": "SLAVE", "actors": {"ha": ha}}, NOW_MS)
    assert rep is not None
    assert replication_lines(rep) == [
        "replication: SLAVE of 127.0.0.1:10912, epoch 3, diverged; written 4000, the master's end 5000 as last "
        "learned (1000 bytes behind); the ha actor is dead: its last report",
        "  why: no epoch of this log is one of the master's"]


def test_metadata_items_are_told_by_state_and_all_alike_in_one_word() -> None:
    unreachable = dict.fromkeys(("topics", "consumer_offsets", "delay_offsets", "timer_checkpoint", "ack_marks"),
                                "unreachable")
    sync = {"state": "running", "master": "127.0.0.1:10911", "last_sync_ms": -1, **unreachable}
    rep = replication_summary({"role": "SLAVE", "actors": {"ha": SLAVE["actors"]["ha"], "metasync": sync}}, NOW_MS)
    assert rep is not None
    assert replication_lines(rep)[1] == "metadata: from 127.0.0.1:10911, never synced; not applied: every item " \
                                        "(unreachable)"
    synced = {**sync, "last_sync_ms": NOW_MS - 400, **dict.fromkeys(unreachable, "ok"), "topics": "error: x",
              "ack_marks": "error: x"}
    rep = replication_summary({"role": "SLAVE", "actors": {"ha": SLAVE["actors"]["ha"], "metasync": synced}}, NOW_MS)
    assert rep is not None
    assert replication_lines(rep)[1] == "metadata: from 127.0.0.1:10911, synced 0.4 s ago; not applied: topics, " \
                                        "ack_marks (error: x)"
    rep = replication_summary({"role": "SLAVE", "actors": {"ha": SLAVE["actors"]["ha"], "metasync": {
        **synced, "topics": "ok", "ack_marks": "ok"}}}, NOW_MS)
    assert rep is not None
    assert replication_lines(rep)[1] == "metadata: from 127.0.0.1:10911, synced 0.4 s ago; every item applied"


def test_a_lone_master_says_it_serves_no_slaves() -> None:
    rep = replication_summary({"role": "ASYNC_MASTER", "actors": {}}, NOW_MS)
    assert rep is not None
    assert replication_lines(rep) == ["replication: ASYNC_MASTER, serving no slaves (no HA port: [ha] serve is off)"]


def test_status_json_carries_the_summary_and_an_older_broker_none() -> None:
    shown = status_json(_reply(SLAVE), NOW_MS)
    assert shown["replication"] == replication_summary(SLAVE, NOW_MS)
    assert shown["replication"]["master"] == "127.0.0.1:10912" and shown["actors"] == SLAVE["actors"]
    assert "replication" not in status_json(_reply({"actors": {}}), NOW_MS)


def test_the_status_text_holds_the_replication_lines_and_the_slaves_table(capsys: pytest.CaptureFixture[str]) -> None:
    print_status(_reply(MASTER))
    out = capsys.readouterr().out
    assert "replication: SYNC_MASTER, epoch 3, HA port 127.0.0.1:10912, 2 slaves connected" in out
    assert "127.0.0.1:50002" in out and "1.5" in out
