"""Waiters: the futures of a consumer's ``poll_async`` / ``receive_async`` calls that found nothing yet.

A waiter is completed by whichever comes first: a pull reply that brings something (on the client's
I/O thread), its timer (``Channel.call_later``, the same thread), or the consumer's close. Nothing is
taken for a waiter until its future is marked running (``set_running_or_notify_cancel``), so a
future cancelled before then takes nothing: what it would have got stays for the next call.

The owner holds its own lock (the one it gives ``Waiters``) around ``add``, ``serve`` and ``drain``
(they touch its buffers through ``take``), and completes the futures they return after letting go
of it (``settle``): a future's done-callbacks run in the thread that completes it, and must not run
with the consumer's lock held.

A waiter's timer holds it only weakly: once served, its future's answer (a poll's whole batch,
megabytes of ZeroMQ's buffers) is freed when the application lets go of it, not when the timer
would have run. Kept alive that long, each batch's memory went back to the system before the next
reply came, and libzmq wrote every reply into fresh pages (three times the page faults).
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

Completion = tuple[Future[Any], Any, BaseException | None]


@dataclass(slots=True, eq=False, weakref_slot=True)
class Waiter(Generic[T]):
    future: Future[T]
    take: Callable[[], T]   # hands over what is buffered (called once the future is running)
    empty: T                # the answer when nothing came
    timer: Future[None] | None = None
    timeout_ms: int = 0


CallLater = Callable[[int, Callable[[], None]], "Future[None]"]


class Waiters:
    def __init__(self, lock: threading.RLock, call_later: CallLater) -> None:
        """``lock``: the owner's; ``call_later``: its channel's timers (``Channel.call_later``)."""
        self._queue: deque[Waiter[Any]] = deque()
        self._lock = lock
        self._call_later = call_later

    def __bool__(self) -> bool:
        return bool(self._queue)

    def add(self, waiter: Waiter[Any], timeout_ms: int, *, armed: bool = True) -> None:
        """Wait for ``serve``; answered with nothing after ``timeout_ms`` unless served first, the time
        counted from now, or (not ``armed``) from ``arm_all``: a poll made before its consumer knows
        its queues waits for them first."""
        self._queue.append(waiter)
        waiter.timeout_ms = timeout_ms
        if armed:
            self._arm(waiter)

    def arm_all(self) -> None:
        """Start the time of every waiter added not ``armed``."""
        for waiter in self._queue:
            if waiter.timer is None:
                self._arm(waiter)

    def _arm(self, waiter: Waiter[Any]) -> None:
        ref = weakref.ref(waiter)
        waiter.timer = self._call_later(waiter.timeout_ms, lambda: self._expire(ref()))

    def serve(self, ready: Callable[[], bool]) -> list[Completion]:
        """Hand what is buffered to the waiters in the order they came, while ``ready()`` says there
        is something; cancelled ones are dropped on the way, taking nothing."""
        done: list[Completion] = []
        while self._queue and ready():
            waiter = self._queue.popleft()
            if waiter.timer is not None:
                waiter.timer.cancel()
            if waiter.future.set_running_or_notify_cancel():
                done.append(_taken(waiter))
        return done

    def _expire(self, waiter: Waiter[Any] | None) -> None:
        """A waiter whose time ran out (the I/O thread): answered with nothing, unless already served
        (and let go of) or cancelled."""
        if waiter is None:
            return
        with self._lock:
            try:
                self._queue.remove(waiter)
            except ValueError:
                return
        if waiter.future.set_running_or_notify_cancel():
            waiter.future.set_result(waiter.empty)

    def drain(self, error: BaseException | None = None) -> list[Completion]:
        """Every waiter, answered with nothing (a close) or with ``error``."""
        done: list[Completion] = []
        while self._queue:
            waiter = self._queue.popleft()
            if waiter.timer is not None:
                waiter.timer.cancel()
            if waiter.future.set_running_or_notify_cancel():
                done.append((waiter.future, waiter.empty, error))
        return done


def _taken(waiter: Waiter[Any]) -> Completion:
    try:
        return (waiter.future, waiter.take(), None)
    except Exception as exc:  # a malformed buffer is the caller's to hear of, not the I/O thread's
        return (waiter.future, None, exc)


def settle(done: list[Completion]) -> None:
    """Complete the futures ``serve`` or ``drain`` gave (without the owner's lock held)."""
    for future, value, error in done:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
