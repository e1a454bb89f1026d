"""``mqstore groups``: list and describe consumer groups (``kafka-consumer-groups.sh``, mqadmin's
consumerProgress); ``reset`` is ``mqstore.scripts.cli.group_reset``.

    mqstore groups list | describe GROUP | reset GROUP --topic T --to earliest|latest|TIME [--force]

Each reads the running broker's readers when there is one, else the stopped store's files.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.engine.read.group_lag import QueueLag, group_lags, groups_in
from mqstore.engine.read.store_files import QueueEntries, queue_ids, read_geometry
from mqstore.scripts.cli.admin import admin_client, common, emit
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError, existing_store
from mqstore.scripts.cli.output import local_time


def add_group_commands(commands: Any) -> None:
    from mqstore.scripts.cli.group_reset import add_reset_command
    groups = commands.add_parser("groups", help="list, describe and reset consumer groups")
    group_commands = groups.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = group_commands.add_parser("list", help="every group with committed offsets (a stopped store too)")
    common(listing)
    listing.set_defaults(handler=_groups_list)
    describe = group_commands.add_parser("describe", help="per queue: committed offset, max offset, lag, last "
                                         "consume time (a stopped store too)")
    describe.add_argument("group", help="the consumer group")
    common(describe)
    describe.set_defaults(handler=_groups_describe)
    add_reset_command(group_commands)


def _groups_list(args: argparse.Namespace) -> int:
    if broker_running(args.store):
        with admin_client(args.store) as admin:
            groups, seen = admin.groups(), admin.group_last_seen_ms()
    else:
        groups, seen = groups_in(offline_offsets(existing_store(args.store)).table), {}
    rows = [{"type": "group", "group": g, "topics": topics, "last_seen_ms": seen.get(g)}
            for g, topics in groups.items()]
    emit(args, rows, "groups", {"group": lambda r: r["group"], "topics": lambda r: " ".join(r["topics"]),
                                "last seen": lambda r: local_time(r["last_seen_ms"])})
    return 0


def offline_offsets(store_dir: Path) -> ConsumerOffsets:
    return ConsumerOffsets.load(store_dir / CONSUMER_OFFSET_FILE, lambda: 0)


def _groups_describe(args: argparse.Namespace) -> int:
    if broker_running(args.store):
        with admin_client(args.store) as admin:
            queues = admin.group_describe(args.group)
    else:
        queues = _offline_describe(existing_store(args.store), args.group)
    if not queues:
        raise CommandError(f"no group {args.group!r}: it never committed an offset")
    # a queue the group never consumed from has no time: null, not 0 (the wire's word for none)
    rows = [{"type": "queue", "group": args.group, **asdict(q), "last_consume_ms": q.last_consume_ms or None}
            for q in queues]
    emit(args, rows, f"group {args.group}", {
        "topic": lambda r: r["topic"], "queue": lambda r: r["queue_id"],
        "committed offset": lambda r: r["committed_offset"], "max offset": lambda r: r["max_queue_offset"],
        "lag": lambda r: r["lag"],
        "last consumed": lambda r: "never" if r["last_consume_ms"] is None else local_time(r["last_consume_ms"])})
    return 0


def _offline_describe(store_dir: Path, group: str) -> list[QueueLag]:
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
