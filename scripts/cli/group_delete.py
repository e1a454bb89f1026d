"""``mqstore groups delete GROUP``: a consumer group's state gone for good, as RocketMQ's
deleteSubGroup (with its offsets) and ``kafka-consumer-groups.sh --delete`` do it:

- its committed offsets, every topic's (``config/consumerOffset.json``, rewritten atomically before
  the command returns);
- in ack mode, its queue index under ``queueindex/{group}/`` (what it acked, what was delivered and
  is due again, what waits for the dead-letter topic), each queue's removed durably
  (``mqstore.engine.ackindex.deletion``).

A consumer of the group that comes back starts as a new group would: from its start position, or
in ack mode from each queue's min offset. The group's ``%RETRY%`` and ``%DLQ%`` topics, and the
records, stay. On a running broker the deletion is refused (exit 1, with the reason) while one of
its consumers pulled, committed or waited in an ack-mode pull within ``--live-ms``, as Kafka refuses
to delete a group with members; there is no ``--force``: stop its consumers first. On a stopped store
the files are changed directly, under the store's lock.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from mqstore.engine.ackindex.deletion import delete_queue_index, group_queue_keys, remove_empty_group_dirs
from mqstore.engine.meta.deleted_groups import DELETED_GROUPS_FILE, DeletedGroups
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE
from mqstore.ipc.transport.channel import BrokerError
from mqstore.scripts.cli.admin import LIVE_MS, admin_client, common, emit
from mqstore.scripts.cli.arguments import positive
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError, existing_store, opened

NON_EMPTY_GROUP = "NON_EMPTY_GROUP"  # the readers' refusal (``mqstore.actors.reader.administration``)


def add_delete_command(group_commands: Any) -> None:
    delete = group_commands.add_parser("delete", help="delete a group: its committed offsets and its ack-mode "
                                       "state go, durably; refused while it has live consumers (a stopped store "
                                       "too)")
    delete.add_argument("group", help="the consumer group")
    delete.add_argument("--live-ms", type=positive, default=LIVE_MS,
                        help="a consumer that pulled or committed within this is live")
    common(delete)
    delete.set_defaults(handler=_groups_delete)


def _groups_delete(args: argparse.Namespace) -> int:
    store, group = Path(args.store), args.group
    if broker_running(store):
        with admin_client(store) as admin:
            seen_ms = admin.group_last_seen_ms().get(group)
            idle_ms = int(time.time() * 1000) - seen_ms if seen_ms is not None else None
            if idle_ms is not None and idle_ms < args.live_ms:
                return _refused(f"group {group} has live consumers (one was served {idle_ms} ms ago, within "
                                f"--live-ms {args.live_ms}): stop them first")
            try:
                topics, ack_queues = admin.delete_group(group, args.live_ms)
            except BrokerError as exc:
                if exc.status != NON_EMPTY_GROUP:
                    raise
                return _refused(str(exc.reason))
    else:
        with opened(existing_store(store)) as held:  # the store's lock: no broker starts meanwhile
            topics = held.offsets.delete_group(group)
            if topics:  # numbered first, as a running broker does: its slaves delete it too
                deleted = DeletedGroups.load(store / DELETED_GROUPS_FILE)
                deleted.record(group)
                deleted.persist(store / DELETED_GROUPS_FILE)
                held.offsets.persist(store / CONSUMER_OFFSET_FILE)
            ack_queues = [(topic, queue_id) for _, topic, queue_id in group_queue_keys(store, group)
                          if delete_queue_index(store, (group, topic, queue_id))]
            remove_empty_group_dirs(store, group)
    if not topics and not ack_queues:
        raise CommandError(f"no group {group!r}: it has no committed offsets and no ack-mode state")
    row = {"type": "deleted_group", "group": group, "offsets": topics,
           "ack_queues": [{"topic": t, "queue_id": q} for t, q in ack_queues]}
    emit(args, [row], f"group {group} deleted", {
        "committed offsets removed (topics)": lambda r: " ".join(r["offsets"]) or "none",
        "ack-mode queue indexes removed": lambda r: " ".join(f"{q['topic']}/{q['queue_id']}"
                                                             for q in r["ack_queues"]) or "none"})
    return 0


def _refused(reason: str) -> int:
    print(f"mqstore groups delete: refused: {reason}", file=sys.stderr)
    return 1
