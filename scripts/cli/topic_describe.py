"""``mqstore topics describe TOPIC``: one topic as an operator looks at it (``kafka-topics.sh
--describe``, mqadmin's topicStatus plus topicRoute and consumerProgress for it):

- its queues: min and max offset, messages (max - min) and bytes: the bytes its messages' records
  take in the commitlog (each record's TOTALSIZE), summed from the consume-queue entries' sizes,
  which is exact and reads no record;
- the groups reading it: a group with committed offsets there, with its lag per queue (max offset
  minus committed), and an ack-mode group, with its ready / unacked / redelivered / dead counts;
- its config: queues, permission (RocketMQ's perm: 6 read and write, 4 read only, 2 write only) and
  whether it is a system topic (``mqstore.engine.put.system_topics``).

On a running broker the readers answer; on a stopped store the files do (an ack-mode group's counts
need the broker, which holds its queue index: offline it is listed by its queues alone).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.engine.ackindex.low_water import queue_index_keys
from mqstore.engine.meta.topics import TopicTable
from mqstore.engine.put.system_topics import is_system_topic
from mqstore.engine.read.store_files import QueueEntries, queue_ids, read_geometry
from mqstore.scripts.cli.admin import admin_client, common
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.groups import offline_describe, offline_offsets
from mqstore.scripts.cli.offline import CommandError, existing_store
from mqstore.scripts.cli.output import print_table

PERMS = {6: "read, write", 4: "read only", 2: "write only", 0: "none"}


@dataclass(frozen=True, slots=True)
class TopicView:
    config: dict[str, Any] | None                 # None: not in config/topics.json (queues on disk only)
    queues: dict[int, tuple[int, int, int]]       # queue id -> (min, max, bytes)
    groups: list[dict[str, Any]]


def add_describe_command(topic_commands: Any) -> None:
    describe = topic_commands.add_parser("describe", help="one topic: its queues (offsets, messages, bytes), the "
                                         "groups reading it with their lag, its config (a stopped store too)")
    describe.add_argument("topic", help="the topic's name")
    common(describe)
    describe.set_defaults(handler=_describe)


def _describe(args: argparse.Namespace) -> int:
    store = Path(args.store)
    view = _online(store, args.topic) if broker_running(store) else _offline(existing_store(store), args.topic)
    if view.config is None and not view.queues:
        raise CommandError(f"no topic {args.topic!r}")
    queues = [{"queue_id": q, "min_queue_offset": lo, "max_queue_offset": hi, "messages": hi - lo, "bytes": size}
              for q, (lo, hi, size) in sorted(view.queues.items())]
    row = {"type": "topic", "topic": args.topic, "config": view.config,
           "messages": sum(q["messages"] for q in queues), "bytes": sum(q["bytes"] for q in queues),
           "queues": queues, "groups": view.groups}
    if args.json:
        print(json.dumps(row))
        return 0
    config = view.config
    print(f"topic {args.topic}: {row['messages']} messages, {row['bytes']} bytes in {len(queues)} queues"
          + ("" if config is None else f"; {config['queue_count']} queues configured, perm {config['perm']} "
             f"({PERMS.get(config['perm'], '?')}){', a system topic' if config['system'] else ''}")
          + ("" if config is not None else "; not in config/topics.json (its queues are on disk)"))
    print("bytes: the commitlog bytes of its messages' records, summed from the consume-queue entries")
    print_table("queues", ("queue", "min offset", "max offset", "messages", "bytes"),
                [(q["queue_id"], q["min_queue_offset"], q["max_queue_offset"], q["messages"], q["bytes"])
                 for q in queues])
    print_table("groups", ("group", "mode", "lag", "ready", "unacked", "redelivered", "dead"),
                [(g["group"], g["mode"], _cell(g.get("lag")), *(_cell(g.get(k)) for k in
                                                                 ("ready", "unacked", "redelivered", "dead")))
                 for g in view.groups])
    if not view.groups:
        print("no group reads it")
    return 0


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _config(topic: str, queue_count: int | None, perm: int | None) -> dict[str, Any] | None:
    if queue_count is None:
        return None
    return {"queue_count": queue_count, "perm": perm if perm is not None else 6, "system": is_system_topic(topic)}


def _file_config(store: Path, topic: str) -> tuple[int | None, int | None]:
    found = TopicTable.load(store, lambda: 0).topics.get(topic)
    return (found.queue_count, found.perm) if found is not None else (None, None)


def _ack_groups(store: Path, topic: str) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for group, queue_topic, queue_id in queue_index_keys(store):
        if queue_topic == topic:
            groups.setdefault(group, []).append(queue_id)
    return groups


def _online(store: Path, topic: str) -> TopicView:
    with admin_client(store) as admin:
        queue_count = admin.topics().get(topic)
        stats = admin.topic_stats(topic)
        groups: list[dict[str, Any]] = []
        for group, topics in sorted(admin.groups().items()):
            if topic in topics:
                lags = [q for q in admin.group_describe(group) if q.topic == topic]
                groups.append(_offsets_group(group, [(q.queue_id, q.committed_offset, q.lag) for q in lags]))
        for group in sorted(_ack_groups(store, topic)):
            counts = [q for q in admin.ack_group_stats(group) if q.topic == topic]
            groups.append({"group": group, "mode": "ack", "queues": [
                {"queue_id": q.queue_id, "ready": q.ready, "unacked": q.unacked, "redelivered": q.redelivered,
                 "dead": q.dead} for q in counts],
                **{k: sum(getattr(q, k) for q in counts) for k in ("ready", "unacked", "redelivered", "dead")}})
    _, perm = _file_config(store, topic)  # the writer's table on disk: the perm (its reply has the queues)
    return TopicView(_config(topic, queue_count, perm), stats, groups)


def _offsets_group(group: str, queues: list[tuple[int, int, int]]) -> dict[str, Any]:
    return {"group": group, "mode": "offsets", "lag": sum(lag for _, _, lag in queues),
            "queues": [{"queue_id": q, "committed_offset": c, "lag": lag} for q, c, lag in queues]}


def _offline(store: Path, topic: str) -> TopicView:
    entries_per_file = read_geometry(store).cq_entries_per_file
    stats: dict[int, tuple[int, int, int]] = {}
    for queue_topic, queue_id in queue_ids(store):
        if queue_topic == topic:
            q = QueueEntries.open(store, topic, queue_id, entries_per_file)
            stats[queue_id] = (q.min_queue_offset, q.end_queue_offset, q.message_bytes())
    queue_count, perm = _file_config(store, topic)
    for queue_id in range(queue_count or 0):
        stats.setdefault(queue_id, (0, 0, 0))
    groups = []
    offsets = offline_offsets(store)
    for group in sorted(offsets.groups_of(topic)):
        lags = [q for q in offline_describe(store, group) if q.topic == topic]
        groups.append(_offsets_group(group, [(q.queue_id, q.committed_offset, q.lag) for q in lags]))
    for group, queue_list in sorted(_ack_groups(store, topic).items()):
        groups.append({"group": group, "mode": "ack", "queues": [{"queue_id": q} for q in queue_list]})
    return TopicView(_config(topic, queue_count, perm), stats, groups)

