"""The reader's poll set: a socket is in it only while something waits on it (every socket polled
costs each round)."""

from __future__ import annotations

from typing import Any

import zmq


def watch(poller: zmq.Poller, sock: zmq.Socket[Any], watching: bool, wanted: bool) -> bool:
    """``sock`` in the poll or out of it, as ``wanted``; returns ``wanted``."""
    if wanted != watching:
        poller.register(sock, zmq.POLLIN) if wanted else poller.unregister(sock)
    return wanted
