"""What wakes the supervisor's loop (``Wake``): its sockets, the exit of an actor process, a stop signal.

An actor's ``multiprocess`` process has a sentinel, a descriptor that turns readable once the process
has exited (through a fork server, once the server reported its exit status, or died itself), so the
poll returns on an exit instead of the loop looking every tick. A stop signal's handler runs inside
the poll, which would otherwise go on to its timeout: the handler also writes a byte to a self-pipe
the poll watches. A sentinel stays readable after the exit, so an exited actor leaves the poll until
its next process starts.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import zmq


class Wake:
    def __init__(self) -> None:
        self.poller = zmq.Poller()
        self._sentinels: dict[str, int] = {}  # actor -> the sentinel of its process, while watched
        self._stop_r, self._stop_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.poller.register(self._stop_r, zmq.POLLIN)

    def register(self, socket: zmq.Socket[Any]) -> None:
        self.poller.register(socket, zmq.POLLIN)

    def watch(self, name: str, sentinel: int) -> None:
        """The poll returns once the actor's process (this ``sentinel``'s) has exited."""
        self.unwatch(name)
        self._sentinels[name] = sentinel
        self.poller.register(sentinel, zmq.POLLIN)

    def unwatch(self, name: str) -> None:
        sentinel = self._sentinels.pop(name, None)
        if sentinel is not None:
            self.poller.unregister(sentinel)

    def stop(self) -> None:
        """From a signal handler: the poll returns now."""
        with contextlib.suppress(BlockingIOError, OSError):  # full: readable already; closed: not serving
            os.write(self._stop_w, b"\0")

    def poll(self, timeout_ms: int) -> dict[Any, int]:
        return dict(self.poller.poll(timeout_ms))

    def close(self) -> None:
        os.close(self._stop_r)
        os.close(self._stop_w)
