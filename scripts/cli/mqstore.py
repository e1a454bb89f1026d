"""The ``mqstore`` command, one subcommand per thing a user does with a store or a broker; each
module of ``mqstore.scripts.cli`` adds its own to ``build_parser``.

    mqstore inspect | query | verify ...              offline tools on a store directory (``offline``)
    mqstore demo [--count N]                          put, get, query and verify on an embedded store (``demo``)
    mqstore start | status | stop | keys              a broker in the foreground, and CURVE keys (``broker``)
    mqstore promote                                   a slave made the master (``promote``)
    mqstore produce | consume                         a client of the running broker (``broker``)
    mqstore topics | groups ...                       topics and consumer groups (``admin``)
    mqstore spark export | verify | rebuild | stats   the Spark jobs (``spark``)
    mqstore bench load | limits | redis | ...         the load generator and the benchmarks (``bench``)

One command-line style (``mqstore.scripts.cli.arguments``): every command that touches a store takes
``--store`` (default ``./mqstore-data``), every argument has a help text that shows its default, and
``mqstore --version`` says which mqstore this is.

``main`` turns the errors a user can fix into a message on stderr. Exit status (``EXIT_*``): 0
success; 1 a command that failed or found something (verify's findings, a query that matches
nothing, a reset refused while the group is live, a broker not ready); 2 usage: bad arguments, a
missing store, a store another process holds, no broker where one is needed; 3 the broker gave up
on an actor that kept dying (``mqstore start``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from mqstore.engine import StoreLockedError
from mqstore.engine.meta.checkpoint import CheckpointError
from mqstore.engine.meta.metafile import MetafileError
from mqstore.ipc.transport.channel import BrokerError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_GAVE_UP = 0, 1, 2, 3


def main(argv: Sequence[str] | None = None) -> int:
    from mqstore.scripts.cli.arguments import resolve_store
    from mqstore.scripts.cli.offline import CommandError
    args = build_parser().parse_args(argv)
    resolve_store(args)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except (CommandError, StoreLockedError, OSError, ValueError, MetafileError, CheckpointError, BrokerError) as exc:
        print(f"mqstore {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    # imported here, not at the top: a broker's actors import this module as their main one (it is
    # the supervisor's), and none of them runs a command
    from mqstore.scripts.cli.admin import add_admin_commands
    from mqstore.scripts.cli.arguments import use_formatter
    from mqstore.scripts.cli.bench import add_bench_commands
    from mqstore.scripts.cli.broker import add_broker_commands, add_client_commands
    from mqstore.scripts.cli.demo import add_demo_command
    from mqstore.scripts.cli.offline import add_offline_commands
    from mqstore.scripts.cli.promote import add_promote_command
    from mqstore.scripts.cli.spark import add_spark_commands
    parser = argparse.ArgumentParser(prog="mqstore", description="A RocketMQ-compatible message store.")
    parser.add_argument("--version", action="version", version=f"mqstore {mqstore_version()}",
                        help="print mqstore's version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_offline_commands(commands)
    add_demo_command(commands)
    add_broker_commands(commands)
    add_promote_command(commands)
    add_client_commands(commands)
    add_admin_commands(commands)
    add_spark_commands(commands)
    add_bench_commands(commands)
    use_formatter(parser)
    return parser


def mqstore_version() -> str:
    """The installed package's version (``pip install -e .``); pyproject's when run from a bare tree."""
    try:
        return version("mqstore")
    except PackageNotFoundError:
        return "unknown (not installed)"


if __name__ == "__main__":
    raise SystemExit(main())
