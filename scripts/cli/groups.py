"""``mqstore groups``: list and describe consumer groups (``kafka-consumer-groups.sh``, mqadmin's
consumerProgress); ``delete`` is ``mqstore.scripts.cli.group_delete``, ``reset``
``mqstore.scripts.cli.group_reset``.

    mqstore groups list | describe GROUP | delete GROUP | reset GROUP --topic T ...

Each reads the running broker's readers when there is one, else the stopped store's files. A group
consumes with committed offsets (``config/consumerOffset.json``), in ack mode (a queue index per
queue under ``queueindex/{group}/``), or both: each part is shown. An ack-mode queue's counts are its
owning reader's (``Admin.ack_group_stats``): ready (due, indexed and not handed out, and what the
consume queue holds past what was indexed), unacked (in consumers' hands), redelivered (handed out
again since the reader opened the queue), dead (waiting to be stored in ``%DLQ%{group}``). On a
stopped store the queue index is not opened: its queues are listed without counts.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mqstore.engine.ackindex.low_water import queue_index_keys
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.engine.read.group_lag import QueueLag, group_lags, groups_in
from mqstore.engine.read.store_files import QueueEntries, queue_ids, read_geometry
from mqstore.ipc.wire.replies import AckQueueStats
from mqstore.scripts.cli.admin import admin_client, common, emit
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError, existing_store
from mqstore.scripts.cli.output import local_time


def add_group_commands(commands: Any) -> None:
    from mqstore.scripts.cli.group_delete import add_delete_command
    from mqstore.scripts.cli.group_reset import add_reset_command
    groups = commands.add_parser("groups", help="list, describe and reset consumer groups")
    group_commands = groups.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = group_commands.add_parser("list", help="every group with committed offsets or ack-mode queues, the "
                                        "ack-mode ones with their counts (a stopped store too)")
    common(listing)
    listing.set_defaults(handler=_groups_list)
    describe = group_commands.add_parser("describe", help="per queue: committed offset, max offset, lag, last "
                                         "consume time; ack mode: ready, unacked, redelivered, dead (a stopped store "
                                         "too)")
    describe.add_argument("group", help="the consumer group")
    common(describe)
    describe.set_defaults(handler=_groups_describe)
    add_reset_command(group_commands)
    add_delete_command(group_commands)


def _groups_list(args: argparse.Namespace) -> int:
    store = Path(args.store)
    ack_topics: dict[str, set[str]] = {}
    for group, topic, _ in queue_index_keys(store):
        ack_topics.setdefault(group, set()).add(topic)
    counts: dict[str, dict[str, int]] = {}
    if broker_running(store):
        with admin_client(store) as admin:
            groups, seen = admin.groups(), admin.group_last_seen_ms()
            for group in ack_topics:
                counts[group] = ack_totals(admin.ack_group_stats(group))
    else:
        groups, seen = groups_in(offline_offsets(existing_store(store)).table), {}
    rows = []
    for group in sorted(set(groups) | set(ack_topics)):
        modes = [m for m, held in (("offsets", group in groups), ("ack", group in ack_topics)) if held]
        rows.append({"type": "group", "group": group, "modes": modes,
                     "topics": sorted(set(groups.get(group, [])) | ack_topics.get(group, set())),
                     "last_seen_ms": seen.get(group), **({"ack": counts.get(group)} if group in ack_topics else {})})
    emit(args, rows, "groups", {"group": lambda r: r["group"], "mode": lambda r: "+".join(r["modes"]),
                                "topics": lambda r: " ".join(r["topics"]),
                                "last seen": lambda r: local_time(r["last_seen_ms"]),
                                "ready / unacked / redelivered / dead": _ack_cell})
    return 0


ACK_COUNTS = ("ready", "unacked", "redelivered", "dead")


def ack_totals(queues: list[AckQueueStats]) -> dict[str, int]:
    return {name: sum(getattr(q, name) for q in queues) for name in ACK_COUNTS}


def _ack_cell(row: dict[str, Any]) -> str:
    if "ack" not in row:
        return ""
    counts = row["ack"]
    return "(the running broker's)" if counts is None else " / ".join(str(counts[n]) for n in ACK_COUNTS)


def offline_offsets(store_dir: Path) -> ConsumerOffsets:
    return ConsumerOffsets.load(store_dir / CONSUMER_OFFSET_FILE, lambda: 0)


def _groups_describe(args: argparse.Namespace) -> int:
    store = Path(args.store)
    ack_queues: list[dict[str, Any]] = []
    if broker_running(store):
        with admin_client(store) as admin:
            queues = admin.group_describe(args.group)
            ack_queues = [{"topic": q.topic, "queue_id": q.queue_id, **{n: getattr(q, n) for n in ACK_COUNTS}}
                          for q in admin.ack_group_stats(args.group)]
    else:
        queues = offline_describe(existing_store(store), args.group)
        ack_queues = [{"topic": topic, "queue_id": queue_id, **dict.fromkeys(ACK_COUNTS)}
                      for group, topic, queue_id in queue_index_keys(store) if group == args.group]
    if not queues and not ack_queues:
        raise CommandError(f"no group {args.group!r}: it never committed an offset nor consumed in ack mode")
    # a queue the group never consumed from has no time: null, not 0 (the wire's word for none)
    rows = [{"type": "queue", "group": args.group, **asdict(q), "last_consume_ms": q.last_consume_ms or None}
            for q in queues]
    emit(args, rows, f"group {args.group}", {
        "topic": lambda r: r["topic"], "queue": lambda r: r["queue_id"],
        "committed offset": lambda r: r["committed_offset"], "max offset": lambda r: r["max_queue_offset"],
        "lag": lambda r: r["lag"],
        "last consumed": lambda r: "never" if r["last_consume_ms"] is None else local_time(r["last_consume_ms"])})
    ack_rows = [{"type": "ack_queue", "group": args.group, **q} for q in ack_queues]
    emit(args, ack_rows, f"group {args.group}, ack mode", {
        "topic": lambda r: r["topic"], "queue": lambda r: r["queue_id"],
        **{name: (lambda r, n=name: "?" if r[n] is None else r[n]) for name in ACK_COUNTS}})
    if ack_rows and ack_rows[0]["ready"] is None and not args.json:
        print("ack-mode counts come from the running broker, which opens the queue index (mqstore start)")
    return 0


def offline_describe(store_dir: Path, group: str) -> list[QueueLag]:
    geometry = read_geometry(store_dir)
    commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size, writable=False)
    opened: dict[tuple[str, int], QueueEntries] = {}

    def entries(topic: str, queue_id: int) -> QueueEntries:
        key = (topic, queue_id)
        if key not in opened:
            opened[key] = QueueEntries.open(store_dir, topic, queue_id, geometry.cq_entries_per_file)
        return opened[key]

    def spans(topic: str) -> dict[int, tuple[int, int]]:
        return {q: (entries(t, q).min_queue_offset, entries(t, q).end_queue_offset)
                for t, q in queue_ids(store_dir) if t == topic}

    def store_ms_at(topic: str, queue_id: int, queue_offset: int) -> int:
        found = entries(topic, queue_id).entry(queue_offset)
        return commitlog.store_ms_at(found[0]) if found is not None else -1

    try:
        offsets = offline_offsets(store_dir)
        return group_lags(group, offsets.topics_of(group), offsets.table, spans, store_ms_at)
    finally:
        commitlog.close()
