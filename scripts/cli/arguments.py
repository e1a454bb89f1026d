"""Argument types every ``mqstore`` command shares: a count, an offset, a timeout or a port that is out
of range is a usage error (argparse prints the usage and exits 2) before any store or broker is touched."""

from __future__ import annotations

import argparse

MAX_PORT = 65535


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
