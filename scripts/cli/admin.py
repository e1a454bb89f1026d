"""Administration of topics and consumer groups, as RocketMQ's mqadmin and Kafka's
``kafka-topics.sh`` / ``kafka-consumer-groups.sh`` do it:

    mqstore topics list | create TOPIC --queues N | update TOPIC --queues N | delete TOPIC
    mqstore groups list | describe GROUP | reset GROUP --topic T --to earliest|latest|TIME [--force]

Against the running broker on ``--store`` when there is one: topics are the writer's
(``config/topics.json``), offsets and lag reader 0's (``mqstore.engine.read.group_lag`` computes the lag, for the
readers and for the offline path alike). ``topics list`` and ``groups list | describe`` also read a
stopped store's files, and ``groups reset`` changes them; the topic changes need the broker's
writer. On a running broker a reset is refused while one of the group's consumers pulled or
committed within ``--live-ms`` unless ``--force``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.engine.meta.topics import TopicTable
from mqstore.engine.read.group_lag import QueueLag, group_lags, groups_in
from mqstore.engine.read.store_files import QueueEntries, queue_ids, read_geometry
from mqstore.ipc.transport.control import control_request
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.scripts.cli.arguments import add_store, positive
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError, existing_store, opened
from mqstore.scripts.cli.output import local_time, print_table

LIVE_MS = 30_000            # a consumer that pulled or committed this recently is live (Kafka: session timeout)
DELETE_WAIT_MS = 10_000
DELETE_ASK_AGAIN_S = 1.0    # the builder hears of a deletion on PUB/SUB: a dropped notice is asked again
POLL_S = 0.02


def add_admin_commands(commands: Any) -> None:
    topics = commands.add_parser("topics", help="list, create, update and delete topics")
    topic_commands = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = topic_commands.add_parser("list", help="every topic with its queues' offsets (a stopped store too)")
    _common(listing)
    listing.set_defaults(handler=_topics_list)
    for name, helptext in (("create", "create a topic (a running broker)"),
                           ("update", "give a topic more queues (a running broker; queues are never removed)")):
        cmd = topic_commands.add_parser(name, help=helptext)
        cmd.add_argument("topic", help="the topic's name")
        cmd.add_argument("--queues", type=positive, default=4 if name == "create" else None,
                         required=name == "update", help="how many queues it has")
        _common(cmd)
        cmd.set_defaults(handler=_topics_create, action_name=name)
    delete = topic_commands.add_parser("delete", help="delete a topic: its consume queues, its config entry and "
                                       "its groups' offsets go; its records stay in the commitlog until retention")
    delete.add_argument("topic", help="the topic's name")
    delete.add_argument("--wait-ms", type=positive, default=DELETE_WAIT_MS,
                        help="how long to wait for the consume queues to be removed")
    _common(delete)
    delete.set_defaults(handler=_topics_delete)

    groups = commands.add_parser("groups", help="list, describe and reset consumer groups")
    group_commands = groups.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = group_commands.add_parser("list", help="every group with committed offsets (a stopped store too)")
    _common(listing)
    listing.set_defaults(handler=_groups_list)
    describe = group_commands.add_parser("describe", help="per queue: committed offset, max offset, lag, last "
                                         "consume time (a stopped store too)")
    describe.add_argument("group", help="the consumer group")
    _common(describe)
    describe.set_defaults(handler=_groups_describe)
    reset = group_commands.add_parser("reset", help="move a group's committed offsets on a topic (a stopped store too)")
    reset.add_argument("group", help="the consumer group")
    reset.add_argument("--topic", required=True, help="the topic whose offsets move")
    reset.add_argument("--to", required=True, metavar="earliest|latest|TIME",
                       help="each queue's min offset, its max offset, or the first message stored at or after "
                            "TIME (ms since the epoch, or an ISO date and time in local time)")
    reset.add_argument("--force", action="store_true", help="reset even while the group has live consumers")
    reset.add_argument("--live-ms", type=positive, default=LIVE_MS,
                       help="a consumer that pulled or committed within this is live")
    _common(reset)
    reset.set_defaults(handler=_groups_reset)


def _common(cmd: argparse.ArgumentParser) -> None:
    add_store(cmd)
    cmd.add_argument("--json", action="store_true", help="one JSON object per line")


def _admin(store: Path) -> Any:
    """An Admin client of the broker on ``store``, with a route to each of its readers."""
    from mqstore.ipc.client.api import Admin
    readers = [n for n in control_request(store, "status")["actors"] if n.startswith("reader-")]
    return Admin(endpoints=Endpoints.for_store(store, max(len(readers), 1)))


def _running(store: Path, what: str) -> None:
    if not broker_running(store):
        raise CommandError(f"no broker runs on {store}: {what} needs one (mqstore start --store {store})")


def _emit(args: argparse.Namespace, rows: list[dict[str, Any]], title: str, columns: dict[str, Callable[..., Any]]
          ) -> None:
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print_table(title, tuple(columns), [tuple(f(r) for f in columns.values()) for r in rows])


# -- topics ----------------------------------------------------------------------------------------


def _topics_list(args: argparse.Namespace) -> int:
    if broker_running(args.store):
        with _admin(args.store) as admin:
            rows = [_topic_row(t, admin.queue_info(t)) for t in sorted(admin.topics())]
    else:
        store_dir = existing_store(args.store)
        entries = read_geometry(store_dir).cq_entries_per_file
        on_disk: dict[str, list[int]] = {}
        for topic, queue_id in queue_ids(store_dir):
            on_disk.setdefault(topic, []).append(queue_id)
        table = TopicTable.load(store_dir, lambda: 0).topics
        rows = []
        for topic in sorted(set(table) | set(on_disk)):
            spans = {q: (0, 0) for q in range(table[topic].queue_count)} if topic in table else {}
            for queue_id in on_disk.get(topic, []):
                q = QueueEntries.open(store_dir, topic, queue_id, entries)
                spans[queue_id] = (q.min_queue_offset, q.end_queue_offset)
            rows.append(_topic_row(topic, spans))
    _emit(args, rows, "topics", {"topic": lambda r: r["topic"], "queues": lambda r: len(r["queues"]),
                                 "messages": lambda r: r["messages"]})
    return 0


def _topic_row(topic: str, spans: dict[int, tuple[int, int]]) -> dict[str, Any]:
    queues = [{"queue_id": q, "min_queue_offset": lo, "max_queue_offset": hi} for q, (lo, hi) in sorted(spans.items())]
    return {"type": "topic", "topic": topic, "queues": queues, "messages": sum(hi - lo for lo, hi in spans.values())}


def _topics_create(args: argparse.Namespace) -> int:
    _running(args.store, f"topics {args.action_name}")
    with _admin(args.store) as admin:
        before = admin.topics().get(args.topic)
        if args.action_name == "update" and before is None:
            raise CommandError(f"no topic {args.topic!r}: create it first")
        if args.action_name == "create" and before is not None:
            raise CommandError(f"topic {args.topic!r} exists with {before} queues: update changes its queues")
        queues = admin.create_topic(args.topic, args.queues)
    if queues != args.queues:
        print(f"mqstore topics {args.action_name}: {args.topic} keeps its {queues} queues (queues are never "
              "removed)", file=sys.stderr)
        return 1
    _emit(args, [{"type": "topic", "topic": args.topic, "queue_count": queues}], "topic",
          {"topic": lambda r: r["topic"], "queues": lambda r: r["queue_count"]})
    return 0


def _topics_delete(args: argparse.Namespace) -> int:
    _running(args.store, "topics delete")
    queues_dir = Path(args.store) / "consumequeue" / args.topic
    with _admin(args.store) as admin:
        existed = admin.delete_topic(args.topic)
        if not existed and not queues_dir.exists():
            raise CommandError(f"no topic {args.topic!r}")
        deadline = time.monotonic() + args.wait_ms / 1000
        ask_again = time.monotonic() + DELETE_ASK_AGAIN_S
        while queues_dir.exists() and time.monotonic() < deadline:
            if time.monotonic() >= ask_again:
                admin.delete_topic(args.topic)
                ask_again = time.monotonic() + DELETE_ASK_AGAIN_S
            time.sleep(POLL_S)
        offsets = admin.delete_topic_offsets(args.topic)
    if queues_dir.exists():
        print(f"mqstore topics delete: {args.topic} is out of the config, but its consume queues are still there "
              f"after {args.wait_ms} ms (is the cqbuilder running?); run it again", file=sys.stderr)
        return 1
    _emit(args, [{"type": "deleted", "topic": args.topic, "config": existed, "offsets": offsets}], "deleted",
          {"topic": lambda r: r["topic"], "was configured": lambda r: r["config"],
           "group offsets removed": lambda r: r["offsets"]})
    return 0


# -- groups ----------------------------------------------------------------------------------------


def _groups_list(args: argparse.Namespace) -> int:
    if broker_running(args.store):
        with _admin(args.store) as admin:
            groups, seen = admin.groups(), admin.group_last_seen_ms()
    else:
        groups, seen = groups_in(_offline_offsets(existing_store(args.store)).table), {}
    rows = [{"type": "group", "group": g, "topics": topics, "last_seen_ms": seen.get(g)}
            for g, topics in groups.items()]
    _emit(args, rows, "groups", {"group": lambda r: r["group"], "topics": lambda r: " ".join(r["topics"]),
                                 "last seen": lambda r: local_time(r["last_seen_ms"])})
    return 0


def _offline_offsets(store_dir: Path) -> ConsumerOffsets:
    return ConsumerOffsets.load(store_dir / CONSUMER_OFFSET_FILE, lambda: 0)


def _groups_describe(args: argparse.Namespace) -> int:
    if broker_running(args.store):
        with _admin(args.store) as admin:
            queues = admin.group_describe(args.group)
    else:
        queues = _offline_describe(existing_store(args.store), args.group)
    if not queues:
        raise CommandError(f"no group {args.group!r}: it never committed an offset")
    # a queue the group never consumed from has no time: null, not 0 (the wire's word for none)
    rows = [{"type": "queue", "group": args.group, **asdict(q), "last_consume_ms": q.last_consume_ms or None}
            for q in queues]
    _emit(args, rows, f"group {args.group}", {
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
        offsets = _offline_offsets(store_dir)
        return group_lags(group, offsets.topics_of(group), offsets.table, spans, store_ms_at)
    finally:
        commitlog.close()


def _groups_reset(args: argparse.Namespace) -> int:
    """On the running broker (refused while the group is live, unless forced), or on a stopped store's
    files (no consumer can be live there)."""
    target, group, topic = _reset_target(args.to), args.group, args.topic
    if broker_running(args.store):
        with _admin(args.store) as admin:
            seen_ms = admin.group_last_seen_ms().get(group)
            idle_ms = int(time.time() * 1000) - seen_ms if seen_ms is not None else None
            if idle_ms is not None and idle_ms < args.live_ms and not args.force:
                print(f"mqstore groups reset: group {group} has live consumers (one was served {idle_ms} ms ago, "
                      f"within --live-ms {args.live_ms}): stop them, or --force", file=sys.stderr)
                return 1
            rows = _reset(group, topic, target, admin.queue_info(topic),
                          lambda q, ts: admin.offset_by_time(topic, q, ts),
                          lambda q, offset: admin.reset_offset(group, topic, q, offset))
    else:
        with opened(existing_store(args.store)) as store:
            spans = {q: (store.min_queue_offset(topic, q), store.max_queue_offset(topic, q))
                     for q in store.topics().get(topic, [])}
            rows = _reset(group, topic, target, spans, lambda q, ts: store.queue_offset_by_time(topic, q, ts),
                          lambda q, offset: store.commit_offset(group, topic, q, offset))
    _emit(args, rows, f"group {group} reset", {"topic": lambda r: r["topic"], "queue": lambda r: r["queue_id"],
                                               "committed offset": lambda r: r["committed_offset"]})
    return 0


def _reset(group: str, topic: str, target: str | int, spans: dict[int, tuple[int, int]],
           offset_by_time: Callable[[int, int], int], commit: Callable[[int, int], None]) -> list[dict[str, Any]]:
    """Commit each queue's new offset: its min, its max, or the first message stored at or after a time."""
    if not spans:
        raise CommandError(f"topic {topic!r} has no queues")
    rows = []
    for queue_id, (lo, hi) in sorted(spans.items()):
        offset = lo if target == "earliest" else hi if target == "latest" else \
            min(max(offset_by_time(queue_id, int(target)), lo), hi)
        commit(queue_id, offset)
        rows.append({"type": "reset", "group": group, "topic": topic, "queue_id": queue_id,
                     "committed_offset": offset})
    return rows


def _reset_target(text: str) -> str | int:
    if text in ("earliest", "latest"):
        return text
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise CommandError(f"--to {text!r} is not earliest, latest, ms since the epoch or an ISO time") from None
