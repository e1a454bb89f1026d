"""Queues of a running broker, as ``rabbitmqctl purge_queue`` empties one for its consumers:

    mqstore queues purge TOPIC [--queue N ...] [--json]

Every group's position on the topic's queues (each one, or those named) moves to the queue's end:
committed consumer offsets move there (written to disk before the command answers), ack-mode groups
lose their ready messages (acked in their queue index, its journal fsynced) while those delivered
and not acked stay with their consumers, as RabbitMQ's purge leaves unacked messages, and a
consumer running at the time gets at most what it had already pulled. The records stay in the
commitlog until retention (``mqstore.actors.reader.purge``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mqstore.ipc.transport.control import control_request
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.scripts.cli.arguments import add_store, non_negative
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError
from mqstore.scripts.cli.output import print_table


def add_queue_commands(commands: Any) -> None:
    queues = commands.add_parser("queues", help="purge a topic's queues")
    actions = queues.add_subparsers(dest="action", required=True, metavar="ACTION")
    purge = actions.add_parser("purge", help="every group's position on the topic's queues moves to their end "
                               "(a running broker); the records stay in the commitlog until retention")
    purge.add_argument("topic", help="the topic whose queues are purged")
    purge.add_argument("--queue", type=non_negative, action="append", dest="queues", metavar="N",
                       help="purge only this queue (repeatable; default: every queue of the topic)")
    add_store(purge)
    purge.add_argument("--json", action="store_true", help="one JSON object per line")
    purge.set_defaults(handler=_purge)


def running_admin(store: Path, what: str) -> Any:
    """An Admin client of the broker on ``store``, with a route to each of its readers."""
    if not broker_running(store):
        raise CommandError(f"no broker runs on {store}: {what} needs one (mqstore start --store {store})")
    from mqstore.ipc.client.api import Admin
    readers = [n for n in control_request(store, "status")["actors"] if n.startswith("reader-")]
    return Admin(endpoints=Endpoints.for_store(store, max(len(readers), 1)))


def _purge(args: argparse.Namespace) -> int:
    with running_admin(args.store, "queues purge") as admin:
        known = admin.queue_info(args.topic)
        if not known:
            raise CommandError(f"no topic {args.topic!r}")
        missing = sorted(set(args.queues or ()) - set(known))
        if missing:
            raise CommandError(f"topic {args.topic!r} has no queue {missing[0]} (its queues: 0 to {len(known) - 1})")
        done = admin.purge_queues(args.topic, args.queues)
    floors = dict(done.floors)
    rows = [{"type": "purged", "topic": args.topic, "group": p.group, "queue_id": p.queue_id, "mode": p.mode,
             "purged": p.purged, "unacked_kept": p.kept if p.mode == "ack" else None,
             "queue_offset": floors.get(p.queue_id)} for p in sorted(done.purged, key=lambda p: (p.group, p.queue_id))]
    if args.json:
        for queue_id, floor in done.floors:
            print(json.dumps({"type": "queue", "topic": args.topic, "queue_id": queue_id, "floor": floor}))
        for row in rows:
            print(json.dumps(row))
        return 0
    print(f"purged {args.topic}: {len(done.floors)} queue(s) emptied for their consumers up to offsets "
          + ", ".join(f"{q}:{f}" for q, f in done.floors))
    if not rows:
        print("no group had a position on them")
    print_table(f"groups of {args.topic}", ("group", "queue", "mode", "purged", "unacked kept"),
                [(r["group"], r["queue_id"], r["mode"], r["purged"], "" if r["unacked_kept"] is None
                  else r["unacked_kept"]) for r in rows])
    return 0
