"""The two clocks every actor reads, in milliseconds: ``monotonic_ms`` for deadlines, intervals and
backoff (never goes back), ``wall_ms`` for what is stored or shown (store times, file names, offsets
files). Pieces that keep time take one of these as an argument, so a test hands them its own."""

from __future__ import annotations

import time


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000
