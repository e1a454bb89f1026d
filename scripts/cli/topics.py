"""``mqstore topics``: list, create, update and delete topics (``kafka-topics.sh``, mqadmin's
topicList / updateTopic / deleteTopic).

    mqstore topics list [--all] | describe TOPIC | create TOPIC --queues N | update TOPIC --queues N
    mqstore topics delete TOPIC

``list`` and ``describe`` (``mqstore.scripts.cli.topic_describe``) also read a stopped store's
files; the changes need the broker's writer. ``list`` hides the system topics
(``mqstore.engine.put.system_topics.is_system_topic``) unless ``--all``, and says how many it hid.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from mqstore.engine.meta.topics import TopicTable
from mqstore.engine.put.system_topics import is_system_topic
from mqstore.engine.read.store_files import QueueEntries, queue_ids, read_geometry
from mqstore.scripts.cli.admin import admin_client, common, emit, require_broker
from mqstore.scripts.cli.arguments import positive
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError, existing_store
from mqstore.scripts.cli.topic_describe import add_describe_command

DELETE_WAIT_MS = 10_000
DELETE_ASK_AGAIN_S = 1.0    # the builder hears of a deletion on PUB/SUB: a dropped notice is asked again
POLL_S = 0.02


def add_topic_commands(commands: Any) -> None:
    topics = commands.add_parser("topics", help="list, create, update and delete topics")
    topic_commands = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = topic_commands.add_parser("list", help="every topic with its queues' offsets (a stopped store too); "
                                        "system topics hidden unless --all")
    listing.add_argument("--all", action="store_true", help="system topics too (SCHEDULE_TOPIC_XXXX, RMQ_SYS_*, "
                         "rmq_sys_*, %%RETRY%%*, %%DLQ%%*)")
    common(listing)
    listing.set_defaults(handler=_topics_list)
    add_describe_command(topic_commands)
    for name, helptext in (("create", "create a topic (a running broker)"),
                           ("update", "give a topic more queues (a running broker; queues are never removed)")):
        cmd = topic_commands.add_parser(name, help=helptext)
        cmd.add_argument("topic", help="the topic's name")
        cmd.add_argument("--queues", type=positive, default=4 if name == "create" else None,
                         required=name == "update", help="how many queues it has")
        common(cmd)
        cmd.set_defaults(handler=_topics_create, action_name=name)
    delete = topic_commands.add_parser("delete", help="delete a topic: its consume queues, its config entry and "
                                       "its groups' offsets go; its records stay in the commitlog until retention")
    delete.add_argument("topic", help="the topic's name")
    delete.add_argument("--wait-ms", type=positive, default=DELETE_WAIT_MS,
                        help="how long to wait for the consume queues to be removed")
    common(delete)
    delete.set_defaults(handler=_topics_delete)


def _topics_list(args: argparse.Namespace) -> int:
    if broker_running(args.store):
        with admin_client(args.store) as admin:
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
    hidden = 0 if args.all else sum(r["system"] for r in rows)
    emit(args, [r for r in rows if args.all or not r["system"]], "topics", {
        "topic": lambda r: r["topic"], "queues": lambda r: len(r["queues"]), "messages": lambda r: r["messages"]})
    if hidden:  # on stderr under --json: the rows stay one JSON object a line
        print(f"{hidden} system topic{'' if hidden == 1 else 's'} hidden; --all shows them",
              file=sys.stderr if args.json else sys.stdout)
    return 0


def _topic_row(topic: str, spans: dict[int, tuple[int, int]]) -> dict[str, Any]:
    queues = [{"queue_id": q, "min_queue_offset": lo, "max_queue_offset": hi} for q, (lo, hi) in sorted(spans.items())]
    return {"type": "topic", "topic": topic, "queues": queues, "messages": sum(hi - lo for lo, hi in spans.values()),
            "system": is_system_topic(topic)}


def _topics_create(args: argparse.Namespace) -> int:
    require_broker(args.store, f"topics {args.action_name}")
    with admin_client(args.store) as admin:
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
    emit(args, [{"type": "topic", "topic": args.topic, "queue_count": queues}], "topic",
         {"topic": lambda r: r["topic"], "queues": lambda r: r["queue_count"]})
    return 0


def _topics_delete(args: argparse.Namespace) -> int:
    require_broker(args.store, "topics delete")
    queues_dir = Path(args.store) / "consumequeue" / args.topic
    with admin_client(args.store) as admin:
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
    emit(args, [{"type": "deleted", "topic": args.topic, "config": existed, "offsets": offsets}], "deleted",
         {"topic": lambda r: r["topic"], "was configured": lambda r: r["config"],
          "group offsets removed": lambda r: r["offsets"]})
    return 0
