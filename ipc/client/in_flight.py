"""A producer's sends in flight: the futures it has handed out and not yet seen answered, so that
``flush`` can wait for every send made before it (Kafka's ``flush``) and ``close`` can flush first.

A send's future is added when the send is made and drops out when it is done, with a result or an
exception alike: a flush waits for answers, not for successes (each future carries its own). A flush
waits for the sends in flight when it was called, not for those made while it waits, so a producer
that keeps sending from another thread cannot hold it for ever. Every send ends by its own timeout,
so a flush with no timeout of its own still ends.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures import wait as wait_all
from typing import Any

from mqstore.ipc.transport.channel import BrokerTimeoutError

__all__ = ["FlushTimeoutError", "Flushing", "InFlight"]


class FlushTimeoutError(BrokerTimeoutError):
    """A flush's timeout passed with sends still unanswered; they may yet be stored."""

    def __init__(self, pending_count: int, timeout_s: float) -> None:
        super().__init__(f"{pending_count} send(s) still pending after the flush's {timeout_s:g} s")
        self.pending_count = pending_count


class InFlight:
    """The futures of the sends in flight (thread-safe: sends are made on any thread, and answered on
    the client's I/O thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: set[Future[Any]] = set()

    def add(self, future: Future[Any]) -> None:
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._done)  # at once, on this thread, for a future done already

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)

    def __len__(self) -> int:
        return len(self._futures)

    def flushing(self) -> Flushing:
        """The wait for every send in flight now."""
        with self._lock:
            return Flushing(list(self._futures))


class Flushing(Future[None]):
    """A future done once every one of ``sends`` is done (whatever their outcome)."""

    def __init__(self, sends: list[Future[Any]]) -> None:
        super().__init__()
        self.set_running_or_notify_cancel()
        self._sends = sends
        self._left = len(sends)
        self._lock = threading.Lock()
        if not sends:
            self.set_result(None)
        for send in sends:
            send.add_done_callback(self._one_done)

    def _one_done(self, _: Future[Any]) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self.set_result(None)

    def pending_count(self) -> int:
        return sum(1 for send in self._sends if not send.done())

    def wait(self, timeout_s: float | None) -> None:
        """Block until every send is answered; FlushTimeoutError, naming how many are not, once
        ``timeout_s`` has passed."""
        wait_all([self], timeout_s)
        self.check(timeout_s or 0.0)

    def check(self, timeout_s: float) -> None:
        """FlushTimeoutError if any send is still unanswered (its wait of ``timeout_s`` is over)."""
        pending = self.pending_count()
        if pending:
            raise FlushTimeoutError(pending, timeout_s)
