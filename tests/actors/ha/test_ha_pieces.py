"""The HA actor's pieces that need no process: the replica count, the slave's decision after the
master's handshake, its answers on the ingress, the actor set by role, the start flags."""

from __future__ import annotations

import argparse
from pathlib import Path

from mqstore.actors.actor_set import actor_names, stop_groups
from mqstore.actors.config import load_config
from mqstore.actors.ha.replicas import ReplicaSet
from mqstore.actors.ha.slave import follow
from mqstore.actors.ha.slave_ingress import SlaveIngress
from mqstore.actors.ha_status import DIVERGED, MASTER_BEHIND, TRANSFER
from mqstore.engine.ha.epochs import EpochEntry
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.ha import MasterHandshake
from mqstore.scripts.cli.ha_flags import add_ha_flags, ha_overrides


def test_copies_are_counted_by_broker_id_and_end_needs_enough_of_them() -> None:
    replicas = ReplicaSet(in_sync_replicas=2, max_gap_not_in_sync=100)
    assert replicas.end(1000) == 0  # the master's copy alone is not two
    first = replicas.join(1, "a", 0)
    assert first is not None and replicas.join(1, "b", 0) is None  # the same id again: refused
    first.acked = 600
    assert replicas.replicated(1000, 3) == replicas.replicated(1000, 3)
    notice = replicas.replicated(1000, 3)
    assert (notice.end, notice.in_sync, notice.connected, notice.epoch) == (600, 0, 1, 3)
    first.acked = 950
    assert replicas.replicated(1000, 3).in_sync == 1
    replicas.leave(first)
    assert replicas.end(1000) == 0 and not replicas.slaves


def test_a_slave_follows_truncates_or_waits_by_the_epochs() -> None:
    master = MasterHandshake(500, 2, (EpochEntry(1, 0), EpochEntry(2, 300)))
    assert follow((), 0, master).state == TRANSFER  # an empty slave
    assert follow((EpochEntry(1, 0),), 200, master) == follow((EpochEntry(1, 0),), 200, master)
    assert follow((EpochEntry(1, 0), EpochEntry(2, 300)), 450, master).resume == 450
    diverged = follow((EpochEntry(1, 0),), 400, master)  # epoch 1 ended at 300 on the master
    assert (diverged.state, diverged.cut) == (DIVERGED, 300)
    behind = follow((EpochEntry(1, 0), EpochEntry(2, 300)), 700, master)
    assert (behind.state, behind.cut) == (MASTER_BEHIND, 500)
    assert follow((), 100, master).state == DIVERGED  # bytes and no epochs: nothing to compare
    assert follow((EpochEntry(7, 0),), 100, master).state == DIVERGED


def test_a_log_of_a_newer_epoch_is_never_cut_to_follow_an_older_master() -> None:
    """A promoted store pointed back at its old master: the old master's epochs agree with its start,
    but what it took as master (epoch 3, from 500) must not be cut to follow that master's tail."""
    old_master = MasterHandshake(800, 2, (EpochEntry(1, 0), EpochEntry(2, 300)))
    newer = follow((EpochEntry(1, 0), EpochEntry(2, 300), EpochEntry(3, 500)), 900, old_master)
    assert (newer.state, newer.cut) == (DIVERGED, None)
    assert "newer" in newer.reason


def test_the_slave_refuses_sends_and_answers_pings(tmp_path: Path) -> None:
    ingress = SlaveIngress(tmp_path, "10.0.0.1:10912", lambda: 42, 1 << 20)
    send = ingress.answer(schema.pack({"v": schema.VERSION, "id": 1, "op": "send",
                                       "msgs": [{"topic": "T", "body": b"x"}]}), [])
    assert send["results"][0]["status"] == "SERVICE_NOT_AVAILABLE"
    assert "10.0.0.1:10912" in send["results"][0]["reason"]
    assert ingress.answer(schema.pack({"v": schema.VERSION, "id": 2, "op": "ping"}), [])["written"] == 42
    assert ingress.answer(schema.pack({"v": schema.VERSION, "id": 3, "op": "topics"}), [])["topics"] == {}
    created = ingress.answer(schema.pack({"v": schema.VERSION, "id": 4, "op": "create_topic", "topic": "T"}), [])
    assert created["ok"] is False and created["status"] == "SERVICE_NOT_AVAILABLE"


def test_the_actor_set_follows_the_role(tmp_path: Path) -> None:
    lone = load_config(tmp_path / "a")
    assert "ha" not in actor_names(lone, {"metasync"})
    master = load_config(tmp_path / "b", broker={"role": "SYNC_MASTER"})
    names = actor_names(master, set())
    assert names.index("ha") > names.index("writer")
    groups = stop_groups(master, names)
    assert groups.index(["ha"]) == groups.index(["writer"]) + 1  # the last sends reach the slaves
    slave = load_config(tmp_path / "c", broker={"role": "SLAVE", "broker_id": 1},
                        ha={"master_address": "127.0.0.1:10912"})
    names = actor_names(slave, {"metasync"})
    assert "ha" in names and "metasync" in names
    assert not {"writer", "scheduler", "timer", "transactions"} & set(names)
    assert "metasync" not in actor_names(slave, set())
    assert stop_groups(slave, names)[0][0] == "ha"


def test_the_start_flags_override_role_and_ha(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_ha_flags(parser)
    overrides: dict[str, dict[str, object]] = {}
    ha_overrides(parser.parse_args(["--role", "SLAVE", "--broker-id", "2", "--master", "127.0.0.1:7000"]), overrides)
    config = load_config(tmp_path, **overrides)  # type: ignore[arg-type]
    assert (config.broker.role, config.broker.broker_id, config.ha.master_address) == ("SLAVE", 2, "127.0.0.1:7000")
    overrides = {}
    ha_overrides(parser.parse_args(["--ha-port", "7001"]), overrides)
    config = load_config(tmp_path, **overrides)  # type: ignore[arg-type]
    assert config.ha.serve and config.ha_address[1] == 7001
