"""Administration of topics and consumer groups, as RocketMQ's mqadmin and Kafka's
``kafka-topics.sh`` / ``kafka-consumer-groups.sh`` do it: the topic commands are
``mqstore.scripts.cli.topics``, the group commands ``mqstore.scripts.cli.groups`` (and
``mqstore.scripts.cli.group_reset``); this module registers them and holds what they share.

Against the running broker on ``--store`` when there is one: topics are the writer's
(``config/topics.json``), offsets and lag reader 0's (``mqstore.engine.read.group_lag`` computes the
lag, for the readers and for the offline path alike), ack-mode groups every reader's. The commands
that read also read a stopped store's files, and those that change groups change them; the topic
changes need the broker's writer.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqstore.ipc.transport.control import control_request
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.scripts.cli.arguments import add_store
from mqstore.scripts.cli.broker import broker_running
from mqstore.scripts.cli.offline import CommandError
from mqstore.scripts.cli.output import print_table

LIVE_MS = 30_000  # a consumer that pulled or committed this recently is live (Kafka: session timeout)


def add_admin_commands(commands: Any) -> None:
    from mqstore.scripts.cli.groups import add_group_commands
    from mqstore.scripts.cli.topics import add_topic_commands
    add_topic_commands(commands)
    add_group_commands(commands)


def common(cmd: argparse.ArgumentParser) -> None:
    add_store(cmd)
    cmd.add_argument("--json", action="store_true", help="one JSON object per line")


def admin_client(store: Path) -> Any:
    """An Admin client of the broker on ``store``, with a route to each of its readers."""
    from mqstore.ipc.client.api import Admin
    readers = [n for n in control_request(store, "status")["actors"] if n.startswith("reader-")]
    return Admin(endpoints=Endpoints.for_store(store, max(len(readers), 1)))


def require_broker(store: Path, what: str) -> None:
    if not broker_running(store):
        raise CommandError(f"no broker runs on {store}: {what} needs one (mqstore start --store {store})")


def emit(args: argparse.Namespace, rows: list[dict[str, Any]], title: str, columns: dict[str, Callable[..., Any]]
         ) -> None:
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print_table(title, tuple(columns), [tuple(f(r) for f in columns.values()) for r in rows])
