"""What the dashboard reads at a glance, computed once per collection from the snapshot
(``mqstore.actors.metrics.collect``) and served beside it in ``/api/status`` as ``overview``:

    broker          version, Python, when the broker started (its supervisor's process) and its uptime
    topics          per topic: system or not, queues, messages held (max less min offset, summed over its
                    queues), the sum of its max offsets, messages in and deliveries since the actors started
                    (deliveries count every group's pulls: two groups reading one message deliver it twice),
                    and the groups reading it
    system_topics   the same counts summed over the system topics (``mqstore.engine.put.system_topics``),
                    which the page folds behind one row
    groups          per group: its mode (offset, ack, or both), topics, queues, and summed over its queues
                    the lag of its committed offsets and, in ack mode, the ready, unacked, redelivered
                    and dead-letter-pending counts; queues it never committed on are counted in ``never``;
                    ``delivered``: the messages the readers handed this group since they started (offset
                    pulls and ack-mode deliveries, summed over its topics: the snapshot's ``delivered``
                    has them per topic)

The page draws these numbers as they are, so the page and this module cannot disagree on a total.
"""

from __future__ import annotations

import functools
import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import psutil

from mqstore.engine.put.system_topics import is_system_topic
from mqstore.engine.read.group_lag import NEVER

TOPIC_COUNTS = ("queues", "messages", "max_offset", "messages_in", "messages_out")
ACK_COUNTS = ("ready", "unacked", "redelivered", "dead")


@functools.cache
def build_info() -> dict[str, str]:
    """The installed mqstore's version (``0+unknown`` outside an install) and the Python running it."""
    try:
        mqstore_version = version("mqstore")
    except PackageNotFoundError:
        mqstore_version = "0+unknown"
    return {"version": mqstore_version, "python": platform.python_version()}


@functools.lru_cache(maxsize=4)
def started_ms(pid: int) -> int | None:
    """When process ``pid`` started (wall clock, ms); None when it is gone or not to be seen."""
    try:
        return int(psutil.Process(pid).create_time() * 1000)
    except (psutil.Error, ValueError):
        return None


def broker_info(status: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """Version and uptime: the broker started when its supervisor did (``status``' ``pid``)."""
    pid = status.get("pid")
    since = started_ms(int(pid)) if isinstance(pid, int) and pid > 0 else None
    uptime = {"started_ms": since, "uptime_s": max(now_ms - since, 0) // 1000} if since is not None else {}
    return {**build_info(), **uptime}


def topic_totals(topics: dict[str, Any], groups: dict[str, list[dict[str, Any]]],
                 ack: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    readers: dict[str, set[str]] = {}
    for group, queues in groups.items():
        for q in queues:
            readers.setdefault(str(q["topic"]), set()).add(group)
    for q in ack:
        readers.setdefault(str(q["topic"]), set()).add(str(q["group"]))
    totals = {}
    for name, info in topics.items():
        spans = list(info.get("queues", {}).values())
        totals[name] = {"system": is_system_topic(name), "queues": int(info.get("queue_count", len(spans))),
                        "messages": sum(max(hi - lo, 0) for lo, hi in spans), "max_offset": sum(hi for _, hi in spans),
                        "messages_in": int(info.get("messages_in", 0)),
                        "messages_out": int(info.get("messages_out", 0)),
                        "groups": sorted(readers.get(name, ()))}
    return totals


def system_totals(totals: dict[str, dict[str, Any]]) -> dict[str, int]:
    system = [t for t in totals.values() if t["system"]]
    return {"topics": len(system), **{key: sum(int(t[key]) for t in system) for key in TOPIC_COUNTS}}


def group_totals(groups: dict[str, list[dict[str, Any]]], ack: list[dict[str, Any]],
                 delivered: dict[str, dict[str, int]] | None = None) -> dict[str, dict[str, Any]]:
    """The groups with offsets or ack-mode queues, each with its ``delivered`` summed over topics."""
    totals: dict[str, dict[str, Any]] = {}

    def entry(group: str) -> dict[str, Any]:
        return totals.setdefault(group, {"modes": set(), "topics": set(), "queues": set(), "lag": 0, "never": 0,
                                         **dict.fromkeys(ACK_COUNTS, 0)})

    for group, queues in groups.items():
        for q in queues:
            g = entry(group)
            g["modes"].add("offset")
            g["topics"].add(str(q["topic"]))
            g["queues"].add((str(q["topic"]), int(q["queue"])))
            g["lag"] += int(q["lag"])
            g["never"] += int(q["committed_offset"]) == NEVER
    for q in ack:
        g = entry(str(q["group"]))
        g["modes"].add("ack")
        g["topics"].add(str(q["topic"]))
        g["queues"].add((str(q["topic"]), int(q["queue"])))
        for key in ACK_COUNTS:
            g[key] += int(q[key])
    return {group: {**_group_row(g), "delivered": sum((delivered or {}).get(group, {}).values())}
            for group, g in sorted(totals.items())}


def _group_row(g: dict[str, Any]) -> dict[str, Any]:
    """A count that is not the group's mode's (lag in ack mode, ready with offsets) is None, not 0."""
    offset, ack = "offset" in g["modes"], "ack" in g["modes"]
    return {"mode": "+".join(m for m, on in (("offset", offset), ("ack", ack)) if on), "topics": sorted(g["topics"]),
            "queues": len(g["queues"]), **{key: g[key] if offset else None for key in ("lag", "never")},
            **{key: g[key] if ack else None for key in ACK_COUNTS}}


def overview(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's totals of one collection; empty for an empty one."""
    if not snapshot:
        return {}
    topics = topic_totals(snapshot["topics"], snapshot["groups"], snapshot["ack"])
    return {"broker": broker_info(snapshot["status"], int(snapshot["time_ms"])), "topics": topics,
            "system_topics": system_totals(topics),
            "groups": group_totals(snapshot["groups"], snapshot["ack"], snapshot.get("delivered"))}


def with_overview(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot as ``/api/status`` serves it."""
    return {**snapshot, "overview": overview(snapshot)}
