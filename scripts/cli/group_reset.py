"""``mqstore groups reset``: move a group's committed offsets on a topic, as ``kafka-consumer-groups.sh
--reset-offsets`` and mqadmin's resetOffsetByTime do.

On a running broker a reset is refused while one of the group's consumers pulled or committed
within ``--live-ms`` unless ``--force``; on a stopped store it changes ``config/consumerOffset.json``
(no consumer can be live there).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from mqstore.scripts.cli.admin import LIVE_MS, admin_client, common, emit
from mqstore.scripts.cli.arguments import positive
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError, existing_store, opened


def add_reset_command(group_commands: Any) -> None:
    reset = group_commands.add_parser("reset", help="move a group's committed offsets on a topic (a stopped store too)")
    reset.add_argument("group", help="the consumer group")
    reset.add_argument("--topic", required=True, help="the topic whose offsets move")
    reset.add_argument("--to", required=True, metavar="earliest|latest|TIME",
                       help="each queue's min offset, its max offset, or the first message stored at or after "
                            "TIME (ms since the epoch, or an ISO date and time in local time)")
    reset.add_argument("--force", action="store_true", help="reset even while the group has live consumers")
    reset.add_argument("--live-ms", type=positive, default=LIVE_MS,
                       help="a consumer that pulled or committed within this is live")
    common(reset)
    reset.set_defaults(handler=_groups_reset)


def _groups_reset(args: argparse.Namespace) -> int:
    """On the running broker (refused while the group is live, unless forced), or on a stopped store's
    files (no consumer can be live there)."""
    target, group, topic = _reset_target(args.to), args.group, args.topic
    if broker_running(args.store):
        with admin_client(args.store) as admin:
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
    emit(args, rows, f"group {group} reset", {"topic": lambda r: r["topic"], "queue": lambda r: r["queue_id"],
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
