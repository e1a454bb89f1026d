"""A collection (``mqstore.actors.metrics.collect.Snapshot``) as Prometheus text, through ``prometheus_client``.

Every name starts with ``mqstore_``; the README's "Watching a running broker" lists them. Counters
come from the actors' own counts (``mqstore.actors.meters``), which restart from zero with an actor's
process, as Prometheus counters may.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from mqstore.actors.config_ha import ROLES, SLAVE
from mqstore.actors.ha_status import SLAVE_STATES
from mqstore.actors.metrics.collect import Snapshot
from mqstore.actors.metrics.overview import broker_info
from mqstore.engine.read.group_lag import NEVER

ACTOR_STATES = ("starting", "running", "stopped", "dead")


def actor_state(state: str) -> str:
    """The state's first word: ``dead (exit 1), restart in 100 ms`` is ``dead``."""
    word = state.split(" ", 1)[0] if state else "unknown"
    return word if word in ACTOR_STATES else "unknown"


def _build_families(status: dict[str, Any], now_ms: int) -> Iterator[Metric]:
    broker = broker_info(status, now_ms)
    build = GaugeMetricFamily("mqstore_build_info", "Always 1: the mqstore version and the Python serving the "
                              "metrics", labels=["version", "python"])
    build.add_metric([broker["version"], broker["python"]], 1.0)
    yield build
    if "started_ms" in broker:
        yield GaugeMetricFamily("mqstore_broker_start_time_seconds", "When the broker (its supervisor) started, "
                                "seconds since the epoch", value=broker["started_ms"] / 1000)


def _actor_families(status: dict[str, Any]) -> Iterator[Metric]:
    cpu = CounterMetricFamily("mqstore_actor_cpu_seconds", "CPU time (user + system) of an actor's process",
                              labels=["actor"])
    rss = GaugeMetricFamily("mqstore_actor_rss_bytes", "Resident memory of an actor's process", labels=["actor"])
    restarts = CounterMetricFamily("mqstore_actor_restarts", "Restarts of an actor since the broker started",
                                   labels=["actor"])
    state = GaugeMetricFamily("mqstore_actor_state", "1 for the state an actor is in (starting, running, stopped, "
                              "dead)", labels=["actor", "state"])
    up = GaugeMetricFamily("mqstore_actor_up", "1 while an actor reports running", labels=["actor"])
    for name, info in sorted(status.get("actors", {}).items()):
        if "cpu_s" in info:
            cpu.add_metric([name], float(info["cpu_s"]))
        if "rss_bytes" in info:
            rss.add_metric([name], float(info["rss_bytes"]))
        restarts.add_metric([name], float(info.get("restarts_total", 0)))
        current = actor_state(str(info.get("state", "")))
        for s in ACTOR_STATES:
            state.add_metric([name, s], 1.0 if current == s else 0.0)
        up.add_metric([name], 1.0 if current == "running" else 0.0)
    denied = CounterMetricFamily("mqstore_remoting_acl_denied", "Requests the remoting front's ACL refused, by "
                                 "reason (unsigned, unknown_account, signature, admin, permission, no_rules)",
                                 labels=["reason"])
    for reason, count in sorted(status.get("actors", {}).get("remoting", {}).get("acl_denied", {}).items()):
        denied.add_metric([str(reason)], float(count))
    ready = GaugeMetricFamily("mqstore_broker_ready", "1 once every actor serves", value=float(bool(
        status.get("ready"))))
    yield from (cpu, rss, restarts, state, up, denied, ready)


def _topic_families(topics: dict[str, Any]) -> Iterator[Metric]:
    counters = {key: CounterMetricFamily(f"mqstore_topic_{key}", helptext, labels=["topic"]) for key, helptext in (
        ("messages_in", "Messages the writer appended to a topic"), ("bytes_in", "Record bytes appended to a topic"),
        ("messages_out", "Messages pulls (either mode) delivered from a topic"),
        ("bytes_out", "Record bytes pulls delivered"))}
    queues = GaugeMetricFamily("mqstore_topic_queues", "Queues of a topic", labels=["topic"])
    low = GaugeMetricFamily("mqstore_queue_min_offset", "A queue's first queue offset", labels=["topic", "queue"])
    high = GaugeMetricFamily("mqstore_queue_max_offset", "One past a queue's last queue offset",
                             labels=["topic", "queue"])
    for topic, info in topics.items():
        for key, family in counters.items():
            family.add_metric([topic], float(info[key]))
        queues.add_metric([topic], float(info["queue_count"]))
        for queue_id, (lo, hi) in info["queues"].items():
            low.add_metric([topic, queue_id], float(lo))
            high.add_metric([topic, queue_id], float(hi))
    yield from (*counters.values(), queues, low, high)


def _offset_families(offsets: dict[str, Any]) -> Iterator[Metric]:
    written = offsets["written"]
    for key, helptext in (("written", "Commitlog offset the writer appended up to"),
                          ("flushed", "Commitlog offset flushed to disk"),
                          ("dispatched", "Commitlog offset the writer dispatched to the builders up to")):
        yield GaugeMetricFamily(f"mqstore_commitlog_{key}_offset", helptext, value=float(offsets[key]))
    yield GaugeMetricFamily("mqstore_commitlog_flush_lag_bytes", "Written but not yet flushed",
                            value=float(max(written - offsets["flushed"], 0)))
    applied = GaugeMetricFamily("mqstore_builder_applied_offset", "Commitlog offset a builder applied up to",
                                labels=["builder"])
    lag = GaugeMetricFamily("mqstore_builder_lag_bytes", "Written but not yet applied by a builder",
                            labels=["builder"])
    for builder, offset in sorted(offsets["applied"].items()):
        applied.add_metric([builder], float(offset))
        lag.add_metric([builder], float(max(written - offset, 0)))
    yield from (applied, lag)


def _group_families(groups: dict[str, Any], ack: list[dict[str, Any]],
                    delivered: dict[str, dict[str, int]] | None = None) -> Iterator[Metric]:
    labels = ["group", "topic", "queue"]
    committed = GaugeMetricFamily("mqstore_group_committed_offset", "A group's committed queue offset (absent "
                                  "while it never committed on the queue)", labels=labels)
    lag = GaugeMetricFamily("mqstore_group_lag_messages", "A queue's max offset minus the group's committed offset",
                            labels=labels)
    last = GaugeMetricFamily("mqstore_group_last_consume_timestamp_seconds",
                             "Store time of the last message the group consumed (absent while it consumed none "
                             "still stored)", labels=labels)
    for group, queues in groups.items():
        for q in queues:
            key = [group, str(q["topic"]), str(q["queue"])]
            if q["committed_offset"] != NEVER:
                committed.add_metric(key, float(q["committed_offset"]))
            lag.add_metric(key, float(q["lag"]))
            if q["last_consume_ms"] > 0:
                last.add_metric(key, q["last_consume_ms"] / 1000)
    ready = GaugeMetricFamily("mqstore_ack_ready_messages", "Ack mode: messages ready to be delivered", labels=labels)
    unacked = GaugeMetricFamily("mqstore_ack_unacked_messages", "Ack mode: delivered and not yet acked",
                                labels=labels)
    redelivered = CounterMetricFamily("mqstore_ack_redelivered", "Ack mode: deliveries of a message handed out "
                                      "before (since its reader opened the queue)", labels=labels)
    dead = GaugeMetricFamily("mqstore_ack_dead_letter_pending_messages", "Ack mode: waiting to go to %DLQ%",
                             labels=labels)
    for q in ack:
        key = [str(q["group"]), str(q["topic"]), str(q["queue"])]
        ready.add_metric(key, float(q["ready"]))
        unacked.add_metric(key, float(q["unacked"]))
        redelivered.add_metric(key, float(q["redelivered"]))
        dead.add_metric(key, float(q["dead"]))
    out = CounterMetricFamily("mqstore_group_delivered_messages", "Messages the readers delivered to a group from "
                              "a topic (offset pulls and ack-mode deliveries; a redelivery counts again)",
                              labels=["group", "topic"])
    for group, by_topic in sorted((delivered or {}).items()):
        for topic, messages in sorted(by_topic.items()):
            out.add_metric([group, topic], float(messages))
    yield from (committed, lag, last, ready, unacked, redelivered, dead, out)


FILE_STATES = ("newest", "undispatched", "held", "reclaimable", "retention")


def _file_families(files: list[dict[str, Any]]) -> Iterator[Metric]:
    """Per commitlog file the writer described (``mqstore.actors.writer.reclaimer``): what holds it."""
    state = GaugeMetricFamily("mqstore_commitlog_file_state", "1 for what a commitlog file waits for: newest, "
                              "undispatched, held (by groups), reclaimable, retention (the clock)",
                              labels=["file", "state"])
    expires = GaugeMetricFamily("mqstore_commitlog_file_expiry_timestamp_seconds", "When the retention clock lets "
                                "a commitlog file go", labels=["file"])
    held = GaugeMetricFamily("mqstore_commitlog_file_held_messages", "Messages a group has not consumed (ack mode: "
                             "not acked) in a commitlog file; kind offset, ack, or no group", labels=[
                                 "file", "kind", "group", "topic", "queue"])
    for f in files:
        name = f"{int(f['file']):020d}"
        for s in FILE_STATES:
            state.add_metric([name, s], 1.0 if f["state"] == s else 0.0)
        if f["expires_ms"]:
            expires.add_metric([name], f["expires_ms"] / 1000)
        for h in f["held_by"]:
            held.add_metric([name, str(h["kind"]), str(h["group"]), str(h["topic"]), str(h["queue"])],
                            float(h["messages"]))
    yield from (state, expires, held)


def _moved_families(moved: dict[str, Any] | None) -> Iterator[Metric]:
    """What the writer's straggler mover copied since it started (``[retention] move_stragglers_below``)."""
    if not moved:
        return
    for key, helptext in (("messages", "Unacked messages copied to the head of the commitlog so their old file "
                                       "could go"),
                          ("bytes", "Bytes of the copied stragglers"),
                          ("files", "Commitlog files whose stragglers were all copied")):
        yield CounterMetricFamily(f"mqstore_stragglers_moved_{key}", helptext, value=float(moved.get(key, 0)))


def _replication_families(rep: dict[str, Any] | None) -> Iterator[Metric]:
    """Replication (``mqstore.actors.ha_status``): the role, and the master's slaves or the slave's master."""
    if not rep:
        return
    role = GaugeMetricFamily("mqstore_ha_role", "1 for the broker's role (ASYNC_MASTER, SYNC_MASTER, SLAVE)",
                             labels=["role"])
    for r in ROLES:
        role.add_metric([r], 1.0 if rep["role"] == r else 0.0)
    yield role
    if rep["ha_actor"] == "none":
        return
    yield GaugeMetricFamily("mqstore_ha_epoch", "The last epoch of the broker's commitlog", value=float(rep["epoch"]))
    if rep["role"] == SLAVE:
        yield from _slave_side(rep)
        return
    yield GaugeMetricFamily("mqstore_ha_slaves_connected", "Slaves connected past their handshake, counted by "
                            "broker id", value=float(rep["connected"]))
    yield GaugeMetricFamily("mqstore_ha_slaves_in_sync", "Connected slaves within [ha] max_gap_not_in_sync of the "
                            "master's end", value=float(rep["in_sync"]))
    yield GaugeMetricFamily("mqstore_ha_replicated_offset", "Commitlog offset below which [ha] in_sync_replicas "
                            "copies (the master's included) hold the log; 0 while fewer copies exist",
                            value=float(rep["replicated"]))
    families = {key: GaugeMetricFamily(name, helptext, labels=["broker_id"]) for key, name, helptext in (
        ("acked", "mqstore_ha_slave_acked_offset", "Commitlog offset a slave acknowledged holding the log below"),
        ("lag_bytes", "mqstore_ha_slave_lag_bytes", "The master's end less a slave's acknowledged offset"),
        ("lag_ms", "mqstore_ha_slave_lag_seconds", "How long the first byte a slave lacks has been written on the "
                   "master (0: it holds the whole log)"),
        ("since_report_ms", "mqstore_ha_slave_report_age_seconds", "Time since a slave's last offset report"))}
    for slave in rep["slaves"]:
        for key, family in families.items():
            value = float(slave[key])
            family.add_metric([str(slave["broker_id"])], value / 1000 if key.endswith("_ms") else value)
    yield from families.values()


def _slave_side(rep: dict[str, Any]) -> Iterator[Metric]:
    state = GaugeMetricFamily("mqstore_ha_slave_state", "1 for the state a slave's HA connection is in (connecting, "
                              "hello, handshake, transfer, diverged, master_behind)", labels=["state"])
    for s in SLAVE_STATES:
        state.add_metric([s], 1.0 if rep["state"] == s else 0.0)
    yield state
    yield GaugeMetricFamily("mqstore_ha_master_offset", "The master's end as the slave last learned it (its "
                            "handshake, its transfers)", value=float(rep["master_end"]))
    yield GaugeMetricFamily("mqstore_ha_behind_bytes", "The master's end as last learned less the slave's end",
                            value=float(rep["behind_bytes"]))
    if rep["since_master_ms"] >= 0:
        yield GaugeMetricFamily("mqstore_ha_master_quiet_seconds", "Time since anything came from the master "
                                "(absent while not following it)", value=rep["since_master_ms"] / 1000)
    metadata = rep.get("metadata")
    if metadata is None:
        return
    if metadata["last_sync_ms"] >= 0:
        yield GaugeMetricFamily("mqstore_ha_metadata_last_sync_timestamp_seconds", "When the slave last fetched its "
                                "master's metadata (topics, offsets, ...)", value=metadata["last_sync_ms"] / 1000)
        yield GaugeMetricFamily("mqstore_ha_metadata_sync_age_seconds", "Time since the slave last fetched its "
                                "master's metadata", value=metadata["age_ms"] / 1000)
    ok = GaugeMetricFamily("mqstore_ha_metadata_item_ok", "1 when the last fetch of a metadata item (topics, "
                           "consumer_offsets, ...) was applied", labels=["item"])
    for item, item_state in metadata["items"].items():
        ok.add_metric([item], 1.0 if item_state == "ok" else 0.0)
    yield ok


def _histogram(name: str, helptext: str, bounds: list[float], stats: dict[str, Any]) -> HistogramMetricFamily:
    cumulative, total = [], 0
    for bound, count in zip([*bounds, math.inf], stats["buckets"], strict=True):
        total += count
        cumulative.append(("+Inf" if bound == math.inf else repr(bound), float(total)))
    return HistogramMetricFamily(name, helptext, buckets=cumulative, sum_value=float(stats["sum_s"]))


class SnapshotCollector(Collector):
    def __init__(self) -> None:
        self.snapshot: Snapshot = {}

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        if not s:
            return
        yield from _build_families(s["status"], int(s.get("time_ms", 0)))
        yield from _actor_families(s["status"])
        yield from _topic_families(s["topics"])
        yield from _offset_families(s["offsets"])
        yield from _group_families(s["groups"], s["ack"], s.get("delivered"))
        writer = s["status"].get("actors", {}).get("writer", {})
        yield from _file_families(writer.get("files", []))
        yield from _moved_families(writer.get("moved"))
        yield from _replication_families(s.get("replication"))
        disk = s["disk"]
        for key, helptext in (("used_ratio", "Used share of the commitlog's disk (absent while it cannot be read)"),
                              ("max_used_ratio", "Retention deletes expired files past this (disk_max_used_space_"
                                                 "ratio)"),
                              ("clean_forcibly_ratio", "Retention deletes files at once past this"),
                              ("warning_ratio", "Sends are refused past this")):
            if disk[key] >= 0:  # -1: the disk could not be read
                yield GaugeMetricFamily(f"mqstore_disk_{key}", helptext, value=float(disk[key]))
        latency = s["latency"]
        yield _histogram("mqstore_send_latency_seconds", "A send request from the writer's round taking it to its "
                         "answer (SYNC_FLUSH: from its append to its answer once flushed)", latency["bounds_s"],
                         latency["send"])
        yield _histogram("mqstore_pull_latency_seconds", "A pull answered at once, from its request to its reply",
                         latency["bounds_s"], latency["pull"])
        yield CounterMetricFamily("mqstore_metrics_collect_errors", "Sources that did not answer a collection",
                                  value=float(s.get("errors_total", 0)))


class Exposition:
    """Renders a snapshot as Prometheus text (``render``), with one registry kept for the process."""

    def __init__(self) -> None:
        self._collector = SnapshotCollector()
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self._collector)

    def render(self, snapshot: Snapshot) -> bytes:
        self._collector.snapshot = snapshot
        return generate_latest(self._registry)
