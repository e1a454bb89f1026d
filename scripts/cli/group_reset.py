"""``mqstore groups reset``: move a group's committed offsets on a topic, as ``kafka-consumer-groups.sh
--reset-offsets`` and mqadmin's resetOffsetByTime do.

The target, per queue: ``--to earliest | latest | TIME`` (its min offset, its max offset, the first
message stored at or after TIME), ``--to-offset N`` (N), or ``--shift-by N`` (the committed offset
plus N, which may be negative; from the queue's min offset where the group never committed), each
clamped to the queue's [min, max] as Kafka clamps. By default the command only shows the plan (per
queue: the current committed offset and the target), as Kafka's ``--dry-run``; ``--execute`` applies it.

On a running broker the execution is refused while one of the group's consumers pulled or committed
within ``--live-ms`` unless ``--force`` (a plan says so, and changes nothing); on a stopped store it
changes ``config/consumerOffset.json`` (no consumer can be live there).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mqstore.scripts.cli.admin import LIVE_MS, admin_client, common, emit
from mqstore.scripts.cli.arguments import positive
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError, existing_store, opened


@dataclass(frozen=True, slots=True)
class Target:
    """Where each queue's offset goes: ``kind`` earliest, latest, time (``value`` ms), offset or shift."""

    kind: str
    value: int = 0


def add_reset_command(group_commands: Any) -> None:
    reset = group_commands.add_parser("reset", help="plan, and with --execute make, a move of a group's committed "
                                      "offsets on a topic (a stopped store too)")
    reset.add_argument("group", help="the consumer group")
    reset.add_argument("--topic", required=True, help="the topic whose offsets move")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", metavar="earliest|latest|TIME",
                        help="each queue's min offset, its max offset, or the first message stored at or after "
                             "TIME (ms since the epoch, or an ISO date and time in local time)")
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N in each queue, clamped to its "
                        "[min, max]")
    target.add_argument("--shift-by", type=int, metavar="N", help="each committed offset plus N (negative: back), "
                        "clamped to its queue's [min, max]; from the min where the group never committed")
    reset.add_argument("--execute", action="store_true", help="apply the plan (without it: show it, change nothing)")
    reset.add_argument("--force", action="store_true", help="execute even while the group has live consumers")
    reset.add_argument("--live-ms", type=positive, default=LIVE_MS,
                       help="a consumer that pulled or committed within this is live")
    common(reset)
    reset.set_defaults(handler=_groups_reset)


def _groups_reset(args: argparse.Namespace) -> int:
    """On the running broker (refused while the group is live, unless forced), or on a stopped store's
    files (no consumer can be live there)."""
    target, group, topic = _target(args), args.group, args.topic
    if broker_running(args.store):
        with admin_client(args.store) as admin:
            seen_ms = admin.group_last_seen_ms().get(group)
            idle_ms = int(time.time() * 1000) - seen_ms if seen_ms is not None else None
            live = idle_ms is not None and idle_ms < args.live_ms and not args.force
            why = (f"group {group} has live consumers (one was served {idle_ms} ms ago, within --live-ms "
                   f"{args.live_ms})")
            if live and args.execute:
                print(f"mqstore groups reset: {why}: stop them, or --force", file=sys.stderr)
                return 1
            if live:
                print(f"mqstore groups reset: {why}: --execute will be refused unless --force", file=sys.stderr)
            rows = _reset(group, topic, target, admin.queue_info(topic),
                          lambda q: admin.fetch_offset(group, topic, q),
                          lambda q, ts: admin.offset_by_time(topic, q, ts),
                          (lambda q, offset: admin.reset_offset(group, topic, q, offset)) if args.execute else None)
    else:
        with opened(existing_store(args.store)) as store:
            spans = {q: (store.min_queue_offset(topic, q), store.max_queue_offset(topic, q))
                     for q in store.topics().get(topic, [])}
            rows = _reset(group, topic, target, spans, lambda q: store.query_offset(group, topic, q),
                          lambda q, ts: store.queue_offset_by_time(topic, q, ts),
                          (lambda q, offset: store.commit_offset(group, topic, q, offset)) if args.execute else None)
    title = f"group {group} reset" if args.execute else f"group {group} reset plan (nothing changed)"
    emit(args, rows, title, {"topic": lambda r: r["topic"], "queue": lambda r: r["queue_id"],
                             "current offset": lambda r: "none" if r["current_offset"] is None else r["current_offset"],
                             "target offset": lambda r: r["target_offset"]})
    if not args.execute and not args.json:
        print("a plan only: --execute applies it")
    return 0


def _reset(group: str, topic: str, target: Target, spans: dict[int, tuple[int, int]],
           committed: Callable[[int], int], offset_by_time: Callable[[int, int], int],
           commit: Callable[[int, int], None] | None) -> list[dict[str, Any]]:
    """Each queue's current committed offset (None: never) and its target, committed when ``commit``."""
    if not spans:
        raise CommandError(f"topic {topic!r} has no queues")
    rows = []
    for queue_id, (lo, hi) in sorted(spans.items()):
        current = committed(queue_id)
        current_offset = current if current >= 0 else None
        if target.kind == "earliest":
            wanted = lo
        elif target.kind == "latest":
            wanted = hi
        elif target.kind == "time":
            wanted = offset_by_time(queue_id, target.value)
        elif target.kind == "offset":
            wanted = target.value
        else:
            wanted = (lo if current_offset is None else current_offset) + target.value
        offset = min(max(wanted, lo), hi)
        if commit is not None:
            commit(queue_id, offset)
        rows.append({"type": "reset", "group": group, "topic": topic, "queue_id": queue_id,
                     "current_offset": current_offset, "target_offset": offset, "executed": commit is not None})
    return rows


def _target(args: argparse.Namespace) -> Target:
    if args.to_offset is not None:
        return Target("offset", args.to_offset)
    if args.shift_by is not None:
        return Target("shift", args.shift_by)
    text = args.to
    if text in ("earliest", "latest"):
        return Target(text)
    if text.isdigit():
        return Target("time", int(text))
    try:
        return Target("time", int(datetime.fromisoformat(text).timestamp() * 1000))
    except ValueError:
        raise CommandError(f"--to {text!r} is not earliest, latest, ms since the epoch or an ISO time") from None
