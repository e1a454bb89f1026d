"""The ``mqstore`` command, one subcommand per thing a user does with a store or a broker; each
module of ``scripts.cli`` adds its own to ``build_parser``.

    mqstore inspect | query | verify STORE ...        offline tools on a store directory (``offline``)
    mqstore demo [--store DIR] [--count N]            put, get, query and verify on an embedded store (``demo``)
    mqstore start | status | stop | keys              a broker in the foreground, and CURVE keys (``broker``)
    mqstore produce | consume                         a client of the running broker (``broker``)
    mqstore spark export | verify | rebuild | stats   the Spark jobs (``spark``)
    mqstore bench load | limits | redis | ...         the load generator and the benchmarks (``bench``)

``main`` turns the errors a user can fix into a message on stderr. Exit status: 0 success; 1 when
verify leaves findings or a query matches nothing; 2 for bad arguments, a missing store, or a store
another process holds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from engine import StoreLockedError
from engine.checkpoint import CheckpointError
from engine.metafile import MetafileError
from ipc.channel import BrokerError
from scripts.cli.admin import add_admin_commands
from scripts.cli.bench import add_bench_commands
from scripts.cli.broker import add_broker_commands, add_client_commands
from scripts.cli.demo import add_demo_command
from scripts.cli.offline import CommandError, add_offline_commands
from scripts.cli.spark import add_spark_commands


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except (CommandError, StoreLockedError, OSError, ValueError, MetafileError, CheckpointError, BrokerError) as exc:
        print(f"mqstore {args.command}: {exc}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqstore", description="A RocketMQ-compatible message store.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_offline_commands(commands)
    add_demo_command(commands)
    add_broker_commands(commands)
    add_client_commands(commands)
    add_admin_commands(commands)
    add_spark_commands(commands)
    add_bench_commands(commands)
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
