"""A collection as Prometheus text: parsed back with prometheus_client's own parser, every figure is
the one the snapshot holds, histograms are cumulative, and an actor's state is one label set to 1."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import time
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from mqstore.actors.meters import LATENCY_BOUNDS_S, Latencies
from mqstore.actors.metrics.exposition import Exposition, actor_state


def _snapshot() -> dict[str, Any]:
    send = Latencies()
    send.observe(0.0003, 4)      # 4 requests in the 0.5 ms bucket
    send.observe(20.0)           # 1 past every bound
    return {
        "status": {"ready": True, "actors": {
            "writer": {"pid": 10, "state": "running", "restarts_total": 2, "cpu_s": 1.5, "rss_bytes": 1000},
            "reader-0": {"pid": 11, "state": "dead (exit 1), restart in 100 ms", "restarts_total": 0},
            "remoting": {"pid": 12, "state": "running", "restarts_total": 0,
                         "acl_denied": {"signature": 4, "permission": 2}}}},
        "topics": {"Orders": {"queue_count": 2, "queues": {"0": [0, 5], "1": [2, 7]}, "messages_in": 12,
                              "bytes_in": 1200, "messages_out": 3, "bytes_out": 300}},
        "offsets": {"written": 5000, "flushed": 4000, "dispatched": 5000, "applied": {"cqbuilder": 4500}},
        "groups": {"G": [{"topic": "Orders", "queue": 0, "committed_offset": 2, "min_offset": 0, "max_offset": 5,
                          "lag": 3, "last_consume_ms": 1_700_000_000_000}]},
        "ack": [{"group": "A", "topic": "Orders", "queue": 1, "ready": 4, "unacked": 3, "redelivered": 1, "dead": 0}],
        "delivered": {"G": {"Orders": 5}, "A": {"Orders": 4}},
        "disk": {"used_ratio": 0.5, "max_used_ratio": 0.75, "clean_forcibly_ratio": 0.85, "warning_ratio": 0.9},
        "latency": {"bounds_s": list(LATENCY_BOUNDS_S), "send": send.stats(), "pull": Latencies().stats()},
        "errors_total": 3,
    }


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


def test_every_figure_of_the_snapshot_is_exposed_under_its_name() -> None:
    text = Exposition().render(_snapshot())
    got = _samples(text)
    assert got[("mqstore_actor_cpu_seconds_total", (("actor", "writer"),))] == 1.5
    assert got[("mqstore_actor_restarts_total", (("actor", "writer"),))] == 2
    assert got[("mqstore_actor_up", (("actor", "reader-0"),))] == 0
    assert got[("mqstore_actor_state", (("actor", "reader-0"), ("state", "dead")))] == 1
    assert got[("mqstore_actor_state", (("actor", "reader-0"), ("state", "running")))] == 0
    assert got[("mqstore_topic_messages_in_total", (("topic", "Orders"),))] == 12
    assert got[("mqstore_topic_bytes_out_total", (("topic", "Orders"),))] == 300
    assert got[("mqstore_queue_max_offset", (("queue", "1"), ("topic", "Orders")))] == 7
    assert got[("mqstore_commitlog_flush_lag_bytes", ())] == 1000
    assert got[("mqstore_builder_lag_bytes", (("builder", "cqbuilder"),))] == 500
    assert got[("mqstore_group_lag_messages", (("group", "G"), ("queue", "0"), ("topic", "Orders")))] == 3
    assert got[("mqstore_ack_unacked_messages", (("group", "A"), ("queue", "1"), ("topic", "Orders")))] == 3
    assert got[("mqstore_ack_redelivered_total", (("group", "A"), ("queue", "1"), ("topic", "Orders")))] == 1
    assert got[("mqstore_disk_used_ratio", ())] == 0.5
    assert got[("mqstore_metrics_collect_errors_total", ())] == 3
    assert got[("mqstore_broker_ready", ())] == 1
    assert got[("mqstore_remoting_acl_denied_total", (("reason", "signature"),))] == 4
    assert got[("mqstore_remoting_acl_denied_total", (("reason", "permission"),))] == 2
    assert all(line.startswith(("# HELP mqstore_", "# TYPE mqstore_", "mqstore_"))
               for line in text.decode().splitlines())


def test_latency_buckets_are_cumulative_with_their_sum_and_count() -> None:
    got = _samples(Exposition().render(_snapshot()))

    def bucket(le: str) -> float:
        return got[("mqstore_send_latency_seconds_bucket", (("le", le),))]

    assert bucket("0.00025") == 0 and bucket("0.0005") == 4 and bucket("10.0") == 4 and bucket("+Inf") == 5
    assert got[("mqstore_send_latency_seconds_count", ())] == 5
    assert abs(got[("mqstore_send_latency_seconds_sum", ())] - (4 * 0.0003 + 20.0)) < 1e-9
    assert got[("mqstore_pull_latency_seconds_count", ())] == 0


def test_an_empty_collection_renders_nothing_rather_than_failing() -> None:
    assert Exposition().render({}) == b""


def test_a_state_is_its_first_word() -> None:
    assert actor_state("running") == "running"
    assert actor_state("dead (exit -9), restart in 50 ms") == "dead"
    assert actor_state("") == "unknown" and actor_state("odd") == "unknown"


def test_each_commitlog_file_shows_what_holds_it() -> None:
    snapshot = _snapshot()
    snapshot["status"]["actors"]["writer"]["files"] = [
        {"file": 0, "expires_ms": 1_700_000_000_000, "state": "held", "more_holders": 0,
         "held_by": [{"kind": "ack", "group": "A", "topic": "Orders", "queue": 1, "messages": 3}]},
        {"file": 65536, "expires_ms": 0, "state": "newest", "held_by": [], "more_holders": 0}]
    got = _samples(Exposition().render(snapshot))
    first = f"{0:020d}"
    assert got[("mqstore_commitlog_file_state", (("file", first), ("state", "held")))] == 1
    assert got[("mqstore_commitlog_file_state", (("file", first), ("state", "reclaimable")))] == 0
    assert got[("mqstore_commitlog_file_state", (("file", f"{65536:020d}"), ("state", "newest")))] == 1
    assert got[("mqstore_commitlog_file_expiry_timestamp_seconds", (("file", first),))] == 1_700_000_000
    assert got[("mqstore_commitlog_file_held_messages", (("file", first), ("group", "A"), ("kind", "ack"),
                                                         ("queue", "1"), ("topic", "Orders")))] == 3


def test_the_straggler_movers_totals_are_counters_and_absent_when_it_is_off() -> None:
    snapshot = _snapshot()
    assert not any(name.startswith("mqstore_stragglers_moved") for name, _ in _samples(Exposition().render(snapshot)))
    snapshot["status"]["actors"]["writer"]["moved"] = {"messages": 40, "bytes": 41_000, "files": 3}
    got = _samples(Exposition().render(snapshot))
    assert got[("mqstore_stragglers_moved_messages_total", ())] == 40
    assert got[("mqstore_stragglers_moved_bytes_total", ())] == 41_000
    assert got[("mqstore_stragglers_moved_files_total", ())] == 3


def test_a_queue_never_committed_on_or_never_consumed_has_no_committed_or_last_consume_series() -> None:
    """Regression: -1 (never committed) and 0 (never consumed) were exported as values, which a graph of
    the offset or an alert on the last consume time reads as real ones."""
    snapshot = _snapshot()
    snapshot["groups"]["G"].append({"topic": "Orders", "queue": 1, "committed_offset": -1, "min_offset": 2,
                                    "max_offset": 7, "lag": 5, "last_consume_ms": 0})
    snapshot["disk"]["used_ratio"] = -1.0  # the disk could not be read
    got = _samples(Exposition().render(snapshot))
    never = (("group", "G"), ("queue", "1"), ("topic", "Orders"))
    assert ("mqstore_group_committed_offset", never) not in got
    assert ("mqstore_group_last_consume_timestamp_seconds", never) not in got
    assert got[("mqstore_group_lag_messages", never)] == 5  # the lag is real: the whole queue
    consumed = (("group", "G"), ("queue", "0"), ("topic", "Orders"))
    assert got[("mqstore_group_committed_offset", consumed)] == 2
    assert got[("mqstore_group_last_consume_timestamp_seconds", consumed)] == 1_700_000_000
    assert ("mqstore_disk_used_ratio", ()) not in got
    assert got[("mqstore_disk_warning_ratio", ())] == 0.9
    assert all(v >= 0 for v in got.values())


def test_build_info_names_the_version_and_python_and_the_start_time_is_the_supervisors() -> None:
    snapshot = {**_snapshot(), "time_ms": int(time.time() * 1000)}
    snapshot["status"]["pid"] = os.getpid()  # this process stands in for the supervisor
    got = _samples(Exposition().render(snapshot))
    labels = (("python", platform.python_version()), ("version", importlib.metadata.version("mqstore")))
    assert got[("mqstore_build_info", labels)] == 1
    assert got[("mqstore_broker_start_time_seconds", ())] == psutil.Process().create_time()


def test_deliveries_are_a_counter_per_group_and_topic() -> None:
    got = _samples(Exposition().render(_snapshot()))
    assert got[("mqstore_group_delivered_messages_total", (("group", "G"), ("topic", "Orders")))] == 5
    assert got[("mqstore_group_delivered_messages_total", (("group", "A"), ("topic", "Orders")))] == 4
