"""``docs/reference/metrics.md``, written from the exposition itself (``mqstore.actors.metrics.exposition``).

The exposition has no table to read: it builds its families as it goes, some only for a broker in a
given state. So this module renders made-up collections through the real ``Exposition``, one per
state that adds families (a lone broker, one whose straggler mover ran, a master serving slaves, a
slave following its master), and reads every family's name, type, help and labels off the text.
``tests/docs/test_metrics_page.py`` scrapes real brokers and checks what they serve is on the page.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from mqstore.actors.ha_status import METADATA_ITEMS, SLAVE_STATES
from mqstore.actors.metrics.exposition import Exposition
from mqstore.scripts.docs.markdown import GENERATED_NOTE, cell, table

PAGE = "reference/metrics.md"
COMMAND = "python -m mqstore.scripts.docs"
_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? ")
_LABEL = re.compile(r'(\w+)="')
SAMPLE_SUFFIXES = {"counter": ("",), "histogram": ("_bucket", "_sum", "_count")}


@dataclass
class Family:
    name: str
    kind: str
    helptext: str
    labels: set[str] = field(default_factory=set)
    served: str = ""


def _snapshot(replication: dict[str, Any] | None = None, moved: dict[str, int] | None = None) -> dict[str, Any]:
    writer: dict[str, Any] = {"state": "running", "cpu_s": 1.0, "rss_bytes": 1, "restarts_total": 0,
                              "files": [{"file": 0, "state": "held", "expires_ms": 1,
                                         "held_by": [{"kind": "offset", "group": "g", "topic": "t", "queue": 0,
                                                      "messages": 1}]}]}
    if moved:
        writer["moved"] = moved
    actors = {"writer": writer, "remoting": {"state": "running", "acl_denied": {"signature": 1}}}
    latency = {"buckets": [0, 1], "sum_s": 0.1}
    # a live process as the supervisor, so the families drawn from its start time are on the page
    return {"status": {"actors": actors, "ready": True, "pid": os.getpid()}, "time_ms": 1,
            "topics": {"t": {"messages_in": 1, "bytes_in": 1, "messages_out": 1, "bytes_out": 1, "queue_count": 1,
                             "queues": {"0": (0, 1)}}},
            "offsets": {"written": 1, "flushed": 1, "dispatched": 1, "applied": {"cqbuilder": 1}},
            "groups": {"g": [{"topic": "t", "queue": 0, "committed_offset": 1, "lag": 0, "last_consume_ms": 1}]},
            "ack": [{"group": "g", "topic": "t", "queue": 0, "ready": 1, "unacked": 1, "redelivered": 1, "dead": 0}],
            "delivered": {"g": {"t": 1}},
            "disk": {"used_ratio": 0.1, "max_used_ratio": 0.75, "clean_forcibly_ratio": 0.85, "warning_ratio": 0.9},
            "latency": {"bounds_s": [0.001], "send": latency, "pull": latency}, "errors_total": 0,
            "replication": replication}


MASTER = {"role": "SYNC_MASTER", "ha_actor": "running", "epoch": 1, "connected": 1, "in_sync": 1, "replicated": 1,
          "slaves": [{"broker_id": 1, "acked": 1, "lag_bytes": 0, "lag_ms": 0, "since_report_ms": 1}]}
SLAVE = {"role": "SLAVE", "ha_actor": "running", "epoch": 1, "state": SLAVE_STATES[0], "master_end": 1,
         "behind_bytes": 0, "since_master_ms": 1,
         "metadata": {"last_sync_ms": 1, "age_ms": 1, "items": dict.fromkeys(METADATA_ITEMS, "ok")}}
# the broker states that add families, in the order a family is credited to the first that serves it
STATES: list[tuple[str, dict[str, Any]]] = [
    ("every broker", _snapshot({"role": "ASYNC_MASTER", "ha_actor": "none"})),
    ("once the straggler mover ran ([retention] move_stragglers_below)", _snapshot(moved={"messages": 1})),
    ("a master serving slaves ([ha] serve, or SYNC_MASTER)", _snapshot(MASTER)),
    ("a slave", _snapshot(SLAVE)),
]


def families() -> dict[str, Family]:
    found: dict[str, Family] = {}
    for served, snapshot in STATES:
        text = Exposition().render(snapshot).decode()
        helps = dict(re.findall(r"^# HELP (\w+) (.*)$", text, re.M))
        for name, kind in re.findall(r"^# TYPE (\w+) (\w+)$", text, re.M):
            if name not in found:
                found[name] = Family(name, kind, helps[name].replace("\\\\", "\\"), served=served)
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match is None or line.startswith("#"):
                continue
            base = _family_of(match.group(1), found)
            if base is not None:
                found[base].labels |= set(_LABEL.findall(match.group(2) or "")) - {"le"}
    return found


def _family_of(sample: str, found: dict[str, Family]) -> str | None:
    if sample in found:
        return sample
    for name, family in found.items():
        if any(sample == name + suffix for suffix in SAMPLE_SUFFIXES.get(family.kind, ())):
            return name
    return None


def served_names(family: Family) -> list[str]:
    """The sample names a scrape shows for ``family``."""
    if family.kind == "counter":  # prometheus_client names the family with its _total
        return [family.name]
    return [family.name + suffix for suffix in SAMPLE_SUFFIXES.get(family.kind, ("",))]


def render() -> str:
    found = families()
    out = ["# Metrics reference", "", GENERATED_NOTE.format(command=COMMAND), "",
           "The metrics actor serves these on `http://[metrics] host:port/metrics` (Prometheus text, "
           "`127.0.0.1:9469` by default; `mqstore start` turns it on). A counter's samples end in `_total`, a "
           "histogram's in `_bucket` (label `le`), `_sum` and `_count`. Counters come from each actor's own "
           "counts and restart from zero with its process. The other endpoints of the listener are in "
           "[Protocols](protocols.md#http); what to watch is in [Troubleshooting](../operations/troubleshooting.md).",
           ""]
    for served, _ in STATES:
        rows = [[f"`{f.name}`", f.kind, ", ".join(f"`{label}`" for label in sorted(f.labels)) or "—", cell(f.helptext)]
                for f in sorted(found.values(), key=lambda f: f.name) if f.served == served]
        out += [f"## {served[0].upper()}{served[1:]}", "", *table(["Metric", "Type", "Labels", "Help"], rows), ""]
    return "\n".join(out)
