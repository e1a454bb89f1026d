"""Replication in the Prometheus text and the status summary, from status replies written by hand: a
SYNC_MASTER with two slaves, a SLAVE with its metadata sync, a lone master, a broker from before roles."""

from __future__ import annotations

from typing import Any

from mqstore.actors.ha_status import replication_summary
from mqstore.actors.meters import LATENCY_BOUNDS_S, Latencies
from mqstore.actors.metrics.exposition import Exposition

NOW_MS = 1_700_000_002_500

MASTER: dict[str, Any] = {"role": "SYNC_MASTER", "actors": {"ha": {
    "state": "running", "role": "SYNC_MASTER", "epoch": 3, "ha_state": "serving", "listen": "127.0.0.1:10912",
    "written": 5000, "replicated": 4000, "in_sync": 1, "connected": 2, "sent_bytes": 9000, "refused": 0, "closed": 0,
    "slaves": [{"broker_id": 1, "address": "127.0.0.1:50001", "acked": 5000, "lag_bytes": 0, "lag_ms": 0,
                "since_report_ms": 250},
               {"broker_id": 2, "address": "127.0.0.1:50002", "acked": 4000, "lag_bytes": 1000, "lag_ms": 1500,
                "since_report_ms": 3000}]}}}

SLAVE: dict[str, Any] = {"role": "SLAVE", "actors": {
    "ha": {"state": "running", "role": "SLAVE", "epoch": 3, "ha_state": "transfer", "master": "127.0.0.1:10912",
           "reason": "", "written": 4000, "complete": 3900, "confirm": 3000, "master_end": 5000,
           "since_master_ms": 120, "appended_bytes": 4000, "connects": 1, "refused_sends": 0},
    "metasync": {"state": "running", "master": "127.0.0.1:10911", "last_sync_ms": 1_700_000_000_000,
                 "data_version": 4, "rounds": 3, "offsets_moved": 0, "offsets_clamped": 0, "topics": "ok",
                 "consumer_offsets": "ok", "delay_offsets": "error: boom", "timer_checkpoint": "ok",
                 "ack_marks": "never"}}}

MASTER_TEXT = """\
# HELP mqstore_ha_role 1 for the broker's role (ASYNC_MASTER, SYNC_MASTER, SLAVE)
# TYPE mqstore_ha_role gauge
mqstore_ha_role{role="ASYNC_MASTER"} 0.0
mqstore_ha_role{role="SYNC_MASTER"} 1.0
mqstore_ha_role{role="SLAVE"} 0.0
# HELP mqstore_ha_epoch The last epoch of the broker's commitlog
# TYPE mqstore_ha_epoch gauge
mqstore_ha_epoch 3.0
# HELP mqstore_ha_slaves_connected Slaves connected past their handshake, counted by broker id
# TYPE mqstore_ha_slaves_connected gauge
mqstore_ha_slaves_connected 2.0
# HELP mqstore_ha_slaves_in_sync Connected slaves within [ha] max_gap_not_in_sync of the master's end
# TYPE mqstore_ha_slaves_in_sync gauge
mqstore_ha_slaves_in_sync 1.0
# HELP mqstore_ha_replicated_offset Commitlog offset below which [ha] in_sync_replicas copies (the master's \
included) hold the log; 0 while fewer copies exist
# TYPE mqstore_ha_replicated_offset gauge
mqstore_ha_replicated_offset 4000.0
# HELP mqstore_ha_slave_acked_offset Commitlog offset a slave acknowledged holding the log below
# TYPE mqstore_ha_slave_acked_offset gauge
mqstore_ha_slave_acked_offset{broker_id="1"} 5000.0
mqstore_ha_slave_acked_offset{broker_id="2"} 4000.0
# HELP mqstore_ha_slave_lag_bytes The master's end less a slave's acknowledged offset
# TYPE mqstore_ha_slave_lag_bytes gauge
mqstore_ha_slave_lag_bytes{broker_id="1"} 0.0
mqstore_ha_slave_lag_bytes{broker_id="2"} 1000.0
# HELP mqstore_ha_slave_lag_seconds How long the first byte a slave lacks has been written on the master \
(0: it holds the whole log)
# TYPE mqstore_ha_slave_lag_seconds gauge
mqstore_ha_slave_lag_seconds{broker_id="1"} 0.0
mqstore_ha_slave_lag_seconds{broker_id="2"} 1.5
# HELP mqstore_ha_slave_report_age_seconds Time since a slave's last offset report
# TYPE mqstore_ha_slave_report_age_seconds gauge
mqstore_ha_slave_report_age_seconds{broker_id="1"} 0.25
mqstore_ha_slave_report_age_seconds{broker_id="2"} 3.0
"""

SLAVE_TEXT = """\
# HELP mqstore_ha_role 1 for the broker's role (ASYNC_MASTER, SYNC_MASTER, SLAVE)
# TYPE mqstore_ha_role gauge
mqstore_ha_role{role="ASYNC_MASTER"} 0.0
mqstore_ha_role{role="SYNC_MASTER"} 0.0
mqstore_ha_role{role="SLAVE"} 1.0
# HELP mqstore_ha_epoch The last epoch of the broker's commitlog
# TYPE mqstore_ha_epoch gauge
mqstore_ha_epoch 3.0
# HELP mqstore_ha_slave_state 1 for the state a slave's HA connection is in (connecting, hello, handshake, \
transfer, diverged, master_behind)
# TYPE mqstore_ha_slave_state gauge
mqstore_ha_slave_state{state="connecting"} 0.0
mqstore_ha_slave_state{state="hello"} 0.0
mqstore_ha_slave_state{state="handshake"} 0.0
mqstore_ha_slave_state{state="transfer"} 1.0
mqstore_ha_slave_state{state="diverged"} 0.0
mqstore_ha_slave_state{state="master_behind"} 0.0
# HELP mqstore_ha_master_offset The master's end as the slave last learned it (its handshake, its transfers)
# TYPE mqstore_ha_master_offset gauge
mqstore_ha_master_offset 5000.0
# HELP mqstore_ha_behind_bytes The master's end as last learned less the slave's end
# TYPE mqstore_ha_behind_bytes gauge
mqstore_ha_behind_bytes 1000.0
# HELP mqstore_ha_master_quiet_seconds Time since anything came from the master (absent while not following it)
# TYPE mqstore_ha_master_quiet_seconds gauge
mqstore_ha_master_quiet_seconds 0.12
# HELP mqstore_ha_metadata_last_sync_timestamp_seconds When the slave last fetched its master's metadata \
(topics, offsets, ...)
# TYPE mqstore_ha_metadata_last_sync_timestamp_seconds gauge
mqstore_ha_metadata_last_sync_timestamp_seconds 1.7e+09
# HELP mqstore_ha_metadata_sync_age_seconds Time since the slave last fetched its master's metadata
# TYPE mqstore_ha_metadata_sync_age_seconds gauge
mqstore_ha_metadata_sync_age_seconds 2.5
# HELP mqstore_ha_metadata_item_ok 1 when the last fetch of a metadata item (topics, consumer_offsets, ...) was \
applied
# TYPE mqstore_ha_metadata_item_ok gauge
mqstore_ha_metadata_item_ok{item="topics"} 1.0
mqstore_ha_metadata_item_ok{item="consumer_offsets"} 1.0
mqstore_ha_metadata_item_ok{item="delay_offsets"} 0.0
mqstore_ha_metadata_item_ok{item="timer_checkpoint"} 1.0
mqstore_ha_metadata_item_ok{item="ack_marks"} 0.0
"""


def _ha_text(status: dict[str, Any]) -> str:
    """The replication families of a snapshot holding ``status`` (every other part empty)."""
    snapshot = {"status": status, "topics": {}, "groups": {}, "ack": [],
                "offsets": {"written": 0, "flushed": 0, "dispatched": 0, "applied": {}},
                "disk": {"used_ratio": 0.5, "max_used_ratio": 0.75, "clean_forcibly_ratio": 0.85,
                         "warning_ratio": 0.9},
                "latency": {"bounds_s": list(LATENCY_BOUNDS_S), "send": Latencies().stats(),
                            "pull": Latencies().stats()},
                "replication": replication_summary(status, NOW_MS)}
    text = Exposition().render(snapshot).decode()
    return "".join(line + "\n" for line in text.splitlines() if line.startswith(("mqstore_ha_", "# HELP mqstore_ha_",
                                                                                  "# TYPE mqstore_ha_")))


def test_a_master_exposes_its_role_epoch_and_each_slaves_offset_and_lag() -> None:
    assert _ha_text(MASTER) == MASTER_TEXT


def test_a_slave_exposes_its_state_its_masters_end_and_its_metadata_age() -> None:
    assert _ha_text(SLAVE) == SLAVE_TEXT


def test_a_lone_master_exposes_its_role_only_and_an_older_broker_nothing() -> None:
    lone = {"role": "ASYNC_MASTER", "actors": {"writer": {"state": "running"}}}
    assert _ha_text(lone) == MASTER_TEXT.split("# HELP mqstore_ha_epoch")[0].replace(
        'role="ASYNC_MASTER"} 0.0', 'role="ASYNC_MASTER"} 1.0').replace('role="SYNC_MASTER"} 1.0',
                                                                        'role="SYNC_MASTER"} 0.0')
    assert _ha_text({"actors": {}}) == ""


def test_the_summary_of_a_slave_without_a_report_yet_and_of_one_never_synced() -> None:
    starting = {"role": "SLAVE", "actors": {"ha": {"state": "starting"},
                                            "metasync": {"state": "running", "last_sync_ms": -1}}}
    assert replication_summary(starting, NOW_MS) == {
        "role": "SLAVE", "ha_actor": "starting", "epoch": 0, "state": "starting", "written": 0, "reason": "",
        "master": "", "master_end": 0, "behind_bytes": 0, "since_master_ms": -1,
        "metadata": {"master": "", "last_sync_ms": -1, "age_ms": -1, "items": {
            "topics": "never", "consumer_offsets": "never", "delay_offsets": "never", "timer_checkpoint": "never",
            "ack_marks": "never"}}}
