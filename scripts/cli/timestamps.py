"""A point in time on the command line (``produce --deliver-at``, ``consume --from``): epoch
milliseconds, as the store keeps its times, or ISO 8601 (``2024-05-01T12:00:00``, ``2024-05-01 12:00``,
``2024-05-01``; with ``Z`` or ``+02:00`` an offset from UTC, without one the machine's local time, as
``mqstore`` prints store times)."""

from __future__ import annotations

import argparse
from datetime import datetime


def epoch_ms(text: str) -> int:
    """``text`` as epoch milliseconds; an argparse type (a usage error names what it accepts)."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    try:
        moment = datetime.fromisoformat(stripped)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: give epoch milliseconds (1714564800000) or ISO 8601 (2024-05-01T12:00:00, "
            "local time unless it ends in Z or an offset such as +02:00)") from None
    return round(moment.timestamp() * 1000)  # a naive time is local: ``timestamp`` reads it so
