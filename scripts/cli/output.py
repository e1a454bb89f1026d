"""What the ``mqstore`` command prints: records as JSON objects, and tables (rich when it is
installed, aligned plain text otherwise)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mqstore.actors.clock import wall_ms
from mqstore.actors.config_ha import SLAVE
from mqstore.actors.ha_status import replication_summary
from mqstore.engine import Record

BODY_PREVIEW_CHARS = 40

Row = Sequence[object]


def json_body(body: bytes) -> tuple[str, str]:
    """A body for JSON and its encoding: the text when it is UTF-8, else base64."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def record_json(record: Record) -> dict[str, Any]:
    """Every field of a record, JSON-ready; the body as text when it is UTF-8, else base64."""
    body, encoding = json_body(record.body)
    return {
        "type": "record", "topic": record.topic, "queue_id": record.queue_id, "queue_offset": record.queue_offset,
        "phys_offset": record.phys_offset, "size": record.size, "flag": record.flag, "sys_flag": record.sys_flag,
        "tags": record.tags, "keys": record.keys, "properties": record.properties, "body": body,
        "encoding": encoding, "body_crc": record.body_crc, "born_ms": record.born_ms,
        "born_host": str(record.born_host), "store_ms": record.store_ms, "store_host": str(record.store_host),
        "reconsume_times": record.reconsume_times, "prepared_tx_offset": record.prepared_tx_offset,
        "msg_id": record.msg_id, "uniq_key": record.uniq_key,
    }


def print_records(records: list[dict[str, Any]]) -> None:
    print_table("records", ("phys offset", "topic", "queue", "queue offset", "tags", "keys", "stored", "msg id",
                            "body"),
                [(r["phys_offset"], r["topic"], r["queue_id"], r["queue_offset"], r["tags"] or "",
                  " ".join(r["keys"]), local_time(r["store_ms"]), r["msg_id"], _preview(r)) for r in records])


def _preview(record: dict[str, Any]) -> str:
    body = str(record["body"])
    text = body if len(body) <= BODY_PREVIEW_CHARS else body[:BODY_PREVIEW_CHARS - 1] + "…"
    return text if record["encoding"] == "utf-8" else f"base64:{text}"


def local_time(value: object) -> str:
    """A store timestamp (ms) as local time; anything else as it is."""
    if not isinstance(value, int) or value <= 0:
        return "" if value is None else str(value)
    return datetime.fromtimestamp(value / 1000).isoformat(sep=" ", timespec="milliseconds")


def print_status(reply: dict[str, Any]) -> None:
    """The title and the dashboard's line as plain lines (a path or a URL is never wrapped, whatever the
    width), the actors as a table."""
    from rich.table import Table
    print(f"broker on {reply['store']} (pid {reply['pid']}, {reply['flush_mode']}), "
          f"written {reply['written']}, flushed {reply['flushed']}")
    table = Table()
    for column in ("actor", "pid", "state", "restarts", "cpu %", "rss MiB", "lag bytes"):
        table.add_column(column)
    for name, info in reply["actors"].items():
        table.add_row(name, str(info.get("pid")), str(info.get("state")), str(info.get("restarts")),
                      f"{info.get('cpu_percent', 0):.0f}", f"{info.get('rss_bytes', 0) / 2**20:.1f}",
                      str(info.get("lag_bytes", "")))
    console().print(table)
    rep = replication_summary(reply, wall_ms())
    if rep is not None:
        for line in replication_lines(rep):
            print(line)
        print_table("slaves", ("broker id", "address", "acked offset", "lag bytes", "lag s", "last report s"),
                    slave_rows(rep))
    print_reclamation(reply["actors"].get("writer", {}))
    print_metasync(reply["actors"].get("metasync", {}))
    if reply.get("metrics_url"):
        print(f"dashboard: {reply['metrics_url']}, Prometheus metrics: {reply['metrics_url']}metrics")


def print_metasync(stats: dict[str, Any]) -> None:
    """What a slave's metadata sync (``mqstore.actors.metasync.actor``) moved, under the replication
    lines (which say its master, its age and each item's state): its rounds, the topics' data version,
    the offsets and ack marks moved and those held at the slave's queue end."""
    if "rounds" not in stats:
        return
    print(f"  {stats['rounds']} rounds, topics at the master's data version {stats['data_version']}; consumer "
          f"offsets moved {stats['offsets_moved']}, held at the queue end {stats['offsets_clamped']}; ack marks "
          f"{stats['ack_marks_seen']}, queues moved {stats['ack_queues_moved']}, messages acked {stats['ack_acked']}, "
          f"held at the queue end {stats['ack_clamped']}")


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}"


def replication_lines(rep: dict[str, Any]) -> list[str]:
    """The replication summary (``mqstore.actors.ha_status``) as the lines under the actors' table."""
    if rep["ha_actor"] == "none":
        return [f"replication: {rep['role']}, serving no slaves (no HA port: [ha] serve is off)"]
    stale = "" if rep["ha_actor"] == "running" else f"; the ha actor is {rep['ha_actor']}: its last report"
    if rep["role"] != SLAVE:
        count = rep["connected"]
        return [f"replication: {rep['role']}, epoch {rep['epoch']}, HA port {rep['listen']}, {count} "
                f"slave{'' if count == 1 else 's'} connected ({rep['in_sync']} in sync), replicated to "
                f"{rep['replicated']} of {rep['written']}{stale}"]
    heard = "" if rep["since_master_ms"] < 0 else f", heard from it {_seconds(rep['since_master_ms'])} s ago"
    lines = [f"replication: SLAVE of {rep['master']}, epoch {rep['epoch']}, {rep['state']}; written "
             f"{rep['written']}, the master's end {rep['master_end']} as last learned ({rep['behind_bytes']} bytes "
             f"behind){heard}{stale}"]
    if rep["reason"]:
        lines.append(f"  why: {rep['reason']}")
    metadata = rep.get("metadata")
    if metadata is not None:
        synced = "never synced" if metadata["age_ms"] < 0 else f"synced {_seconds(metadata['age_ms'])} s ago"
        items: dict[str, str] = metadata["items"]
        failed: dict[str, list[str]] = {}
        for item, state in items.items():
            if state != "ok":
                failed.setdefault(state, []).append(item)
        told = "; ".join(f"{'every item' if len(names) == len(items) else ', '.join(names)} ({state})"
                         for state, names in failed.items())
        lines.append(f"metadata: from {metadata['master']}, {synced}; "
                     + (f"not applied: {told}" if failed else "every item applied"))
    return lines


def slave_rows(rep: dict[str, Any]) -> list[Row]:
    """A master's connected slaves: id, address, acknowledged offset, lag in bytes and seconds, and
    the time since each one's last report."""
    return [(s["broker_id"], s["address"], s["acked"], s["lag_bytes"], _seconds(s["lag_ms"]),
             _seconds(s["since_report_ms"])) for s in rep.get("slaves", ())]


def status_json(reply: dict[str, Any], now_ms: int | None = None) -> dict[str, Any]:
    """``mqstore status --json``: the supervisor's reply, each holder of a commitlog file naming its
    queue ``queue_id`` as every other JSON output does (the wire says ``queue``), and replication's
    summary (``mqstore.actors.ha_status``) under ``replication`` when the broker has a role."""
    rep = replication_summary(reply, wall_ms() if now_ms is None else now_ms)
    if rep is not None:
        reply = {**reply, "replication": rep}
    writer = reply.get("actors", {}).get("writer")
    if not writer or not writer.get("files"):
        return reply
    files = [{**f, "held_by": [{("queue_id" if k == "queue" else k): v for k, v in h.items()} for h in f["held_by"]]}
             for f in writer["files"]]
    return {**reply, "actors": {**reply["actors"], "writer": {**writer, "files": files}}}


def commitlog_file_rows(files: Sequence[dict[str, Any]]) -> list[Row]:
    """The writer's description of its oldest commitlog files (``mqstore.actors.writer.reclaimer``) as rows:
    file, state, who holds it (``kind group topic/queue: messages``) and when the clock lets it go."""
    rows: list[Row] = []
    for f in files:
        held = [f"{h['kind']} {h['group']} {h['topic']}/{h['queue']}: {h['messages']}".replace("  ", " ")
                for h in f["held_by"]]
        if f.get("more_holders"):
            held.append(f"+{f['more_holders']} more")
        rows.append((f"{int(f['file']):020d}", f["state"], "; ".join(held), local_time(f["expires_ms"])))
    return rows


def print_reclamation(writer: dict[str, Any]) -> None:
    """What holds each of the writer's oldest commitlog files, and what its straggler mover copied
    (``[retention] move_stragglers_below``) when it is on."""
    print_table("commitlog files, oldest first: what holds each", ("file", "state", "held by", "retention until"),
                commitlog_file_rows(writer.get("files", [])))
    moved = writer.get("moved")
    if moved:
        print(f"stragglers moved since the writer started: {moved.get('messages', 0)} messages, "
              f"{moved.get('bytes', 0)} bytes; {moved.get('files', 0)} files emptied")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Row]) -> None:
    """A rich table when rich is installed, else aligned plain text."""
    if not rows:
        return
    try:
        from rich.table import Table
    except ImportError:
        cells = [[str(c) for c in columns]] + [[str(c) for c in row] for row in rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
        print(title)
        for line in cells:
            print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
        print()
        return
    print(title)
    table = Table()
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(c) for c in row))
    console().print(table)


def console() -> Any:
    """A rich console that leaves a closed stdout to ``main`` (BrokenPipeError, not rich's own exit 1);
    when piped, wide enough for message ids rather than the 80 columns of a guess."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "Broken pipe")
    shown = _Console()
    return shown if shown.is_terminal else _Console(width=200)


def message_line(m: Any, extra: str = "") -> str:
    """A received message on one line: where it is, its tags and keys when it has them, and its body
    as text when it is UTF-8 (escaped, and said so, when it is not)."""
    fields = [f"{m.topic}/{m.queue_id}@{m.queue_offset}"]
    if m.tags:
        fields.append(f"tags={m.tags}")
    if m.keys:
        fields.append(f"keys={','.join(m.keys)}")
    if extra:
        fields.append(extra)
    try:
        text = m.body.decode("utf-8")
    except UnicodeDecodeError:
        fields.append("body (not UTF-8, escaped): " + m.body.decode("latin-1").encode("unicode_escape").decode("ascii"))
    else:
        fields.append(text.translate(_LINE_BREAKS))
    return " ".join(fields)


_LINE_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r"})
