"""What the HA and metasync actors report, and the replication part of a broker's status drawn from it.

The names the reports share with the places that show them: a slave's connection states
(``SLAVE_STATES``, ``mqstore.actors.ha.slave``) and the metadata items a slave fetches
(``METADATA_ITEMS``, ``mqstore.actors.metasync``).

``replication_summary``: from the supervisor's status reply, the role and epoch;
on a master its HA port and each connected slave's acknowledged end and lag (bytes, and time: how
long the first byte the slave lacks has been written, ``mqstore.actors.ha.write_times``); on a slave
its master, its state (and why, when it does not follow), how far it is behind the master's end as
it last learned it, and how fresh its metadata is (the ``metasync`` actor).

One view for every place that shows replication: ``mqstore status`` (text and ``--json``), and the
metrics actor's ``/api/status``, dashboard and Prometheus text. ``None`` for a broker from before
roles. The figures are the ``ha`` actor's last report; ``ha_actor`` says whether it is running, so a
stale report of a dead actor is not read as a live one.

    master: role, ha_actor, epoch, state, listen, written, replicated, in_sync, connected,
            slaves [{broker_id, address, acked, lag_bytes, lag_ms, since_report_ms}]
            (a master that serves no slaves: role, ha_actor "none")
    slave:  role, ha_actor, epoch, state, reason, master, written, master_end, behind_bytes,
            since_master_ms (-1: not following), metadata {master, last_sync_ms, age_ms (-1: never),
            items {name: "ok" / "never" / "unreachable" / "error: ..."}}
"""

from __future__ import annotations

from typing import Any

from mqstore.actors.config_ha import SLAVE

CONNECTING, HELLO, HANDSHAKE, TRANSFER = "connecting", "hello", "handshake", "transfer"
DIVERGED, MASTER_BEHIND = "diverged", "master_behind"
SLAVE_STATES = (CONNECTING, HELLO, HANDSHAKE, TRANSFER, DIVERGED, MASTER_BEHIND)
METADATA_ITEMS = ("topics", "consumer_offsets", "delay_offsets", "timer_checkpoint", "ack_marks")
SLAVE_FIELDS = ("address", "acked", "lag_bytes", "lag_ms", "since_report_ms")


def _int(stats: dict[str, Any], key: str, default: int = 0) -> int:
    value = stats.get(key, default)
    return int(value) if isinstance(value, int | float) else default


def replication_summary(status: dict[str, Any], now_ms: int) -> dict[str, Any] | None:
    """``status``: the supervisor's status reply; ``now_ms``: wall time, for the metadata's age."""
    role = str(status.get("role") or "")
    if not role:
        return None
    actors: dict[str, Any] = status.get("actors") or {}
    ha: dict[str, Any] | None = actors.get("ha")
    if ha is None:
        return {"role": role, "ha_actor": "none"}
    summary: dict[str, Any] = {"role": role, "ha_actor": str(ha.get("state", "")).split(" ", 1)[0] or "unknown",
                               "epoch": _int(ha, "epoch"), "state": str(ha.get("ha_state", "starting")),
                               "written": _int(ha, "written")}
    if role != SLAVE:
        slaves = [{"broker_id": _int(s, "broker_id"), "address": str(s.get("address", "")),
                   **{key: _int(s, key) for key in SLAVE_FIELDS[1:]}}
                  for s in ha.get("slaves") or () if isinstance(s, dict)]
        return {**summary, "listen": str(ha.get("listen", "")), "replicated": _int(ha, "replicated"),
                "in_sync": _int(ha, "in_sync"), "connected": _int(ha, "connected", len(slaves)), "slaves": slaves}
    master_end = _int(ha, "master_end")
    summary.update(reason=str(ha.get("reason", "")), master=str(ha.get("master", "")), master_end=master_end,
                   behind_bytes=max(0, master_end - summary["written"]),
                   since_master_ms=_int(ha, "since_master_ms", -1))
    sync: dict[str, Any] | None = actors.get("metasync")
    if sync is not None:
        last = _int(sync, "last_sync_ms", -1)
        summary["metadata"] = {"master": str(sync.get("master", "")), "last_sync_ms": last,
                               "age_ms": max(0, now_ms - last) if last >= 0 else -1,
                               "items": {item: str(sync.get(item, "never")) for item in METADATA_ITEMS}}
    return summary
