"""What every ``mqstore`` command shares: ``--store`` (default ``./mqstore-data``), help that shows each
argument's default (``DefaultsFormatter``), and argument types: a count, an offset, a timeout or a port
that is out of range is a usage error (argparse prints the usage and exits 2) before any store or
broker is touched."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

MAX_PORT = 65535
DEFAULT_STORE = Path("mqstore-data")


def add_store(cmd: Any, *, positional: bool = False, helptext: str = "store directory") -> None:
    """``--store DIR``; with ``positional`` also a leading ``STORE`` (the older spelling), which wins."""
    cmd.add_argument("--store", type=Path, default=DEFAULT_STORE, help=helptext)
    if positional:
        cmd.add_argument("store_path", nargs="?", type=Path, metavar="STORE", help="the same as --store")


def resolve_store(args: argparse.Namespace) -> None:
    if getattr(args, "store_path", None) is not None:
        args.store = args.store_path


class DefaultsFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default, unless the text already says it or there is none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or default in (None, False, argparse.SUPPRESS) or "%(default)" in text
                or f"({default})" in text or f"default {default}" in text):
            return text
        shown = f"./{default}" if isinstance(default, Path) and not default.is_absolute() else default
        return f"{text} (default: {shown})"


def use_formatter(parser: argparse.ArgumentParser) -> None:
    """``DefaultsFormatter`` for ``parser`` and every subcommand under it."""
    parser.formatter_class = DefaultsFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                use_formatter(sub)


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def port(text: str) -> int:
    value = positive(text)
    if value > MAX_PORT:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (1 to {MAX_PORT})")
    return value


def host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (the host may itself hold colons: an IPv6 address)."""
    host, _, number = text.rpartition(":")
    if not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, port(number)
