"""The ``mqstore`` command, one subcommand per thing a user does with a store or a broker; each
module of ``mqstore.scripts.cli`` adds its own to ``build_parser``.

    mqstore inspect | query | verify ...              offline tools on a store directory (``offline``)
    mqstore demo [--count N]                          put, get, query and verify on an embedded store (``demo``)
    mqstore start | status | stop | keys              a broker in the foreground, and CURVE keys (``broker``)
    mqstore promote                                   a slave made the master (``promote``)
    mqstore produce | consume                         a client of the running broker (``produce``, ``consume``)
    mqstore topics | groups ...                       topics and consumer groups (``admin``)
    mqstore config                                    the effective configuration (``settings``)
    mqstore spark export | verify | rebuild | stats   the Spark jobs (``spark``)
    mqstore bench load | limits | redis | ...         the load generator and the benchmarks (``bench``)

One command-line style (``mqstore.scripts.cli.arguments``): every command that touches a store takes
``--store`` (default ``./mqstore-data``), every argument has a help text that shows its default, and
``mqstore --version`` says which mqstore this is.

``main`` turns the errors a user can fix into a message on stderr. Exit status (``EXIT_*``): 0
success; 1 a command that failed or found something (verify's findings, a query that matches
nothing, a reset refused while the group is live, a broker not ready); 2 usage: bad arguments, a
missing store, a store another process holds, no broker where one is needed; 3 the broker gave up
on an actor that kept dying (``mqstore start``); 130 stopped by Ctrl-C (``produce`` and ``consume``
first print what they did so far); 141 its output was closed (``mqstore status | head -1``): it stops
writing and exits quietly, with the status git and other SIGPIPE-killed commands leave in a shell.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from mqstore.engine import StoreLockedError
from mqstore.engine.meta.checkpoint import CheckpointError
from mqstore.engine.meta.metafile import MetafileError
from mqstore.ipc.transport.channel import BrokerError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_GAVE_UP = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_PIPE_CLOSED = 128 + signal.SIGINT, 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    from mqstore.scripts.cli.arguments import resolve_store
    from mqstore.scripts.cli.offline import CommandError
    args = build_parser().parse_args(argv)
    resolve_store(args)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        print(file=sys.stderr)  # past the ^C the terminal echoed
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_PIPE_CLOSED
    except (CommandError, StoreLockedError, OSError, ValueError, MetafileError, CheckpointError, BrokerError) as exc:
        print(f"mqstore {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for the closed pipe goes nowhere at exit
    instead of raising there again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a descriptor (a test's capture): nothing to redirect
        pass
    finally:
        os.close(devnull)


def build_parser() -> argparse.ArgumentParser:
    # imported here, not at the top: a broker's actors import this module as their main one (it is
    # the supervisor's), and none of them runs a command
    from mqstore.scripts.cli.admin import add_admin_commands
    from mqstore.scripts.cli.arguments import use_formatter
    from mqstore.scripts.cli.bench import add_bench_commands
    from mqstore.scripts.cli.broker import add_broker_commands
    from mqstore.scripts.cli.consume import add_consume_command
    from mqstore.scripts.cli.demo import add_demo_command
    from mqstore.scripts.cli.dlq import add_dlq_commands
    from mqstore.scripts.cli.offline import add_offline_commands
    from mqstore.scripts.cli.produce import add_produce_command
    from mqstore.scripts.cli.promote import add_promote_command
    from mqstore.scripts.cli.queues import add_queue_commands
    from mqstore.scripts.cli.settings import add_config_command
    from mqstore.scripts.cli.spark import add_spark_commands
    parser = argparse.ArgumentParser(prog="mqstore", description="A RocketMQ-compatible message store.")
    parser.add_argument("--version", action="version", version=f"mqstore {mqstore_version()}",
                        help="print mqstore's version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_offline_commands(commands)
    add_demo_command(commands)
    add_broker_commands(commands)
    add_promote_command(commands)
    add_produce_command(commands)
    add_consume_command(commands)
    add_admin_commands(commands)
    add_queue_commands(commands)
    add_dlq_commands(commands)
    add_config_command(commands)
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
