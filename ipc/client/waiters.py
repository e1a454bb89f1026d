"""Waiters: the futures of a consumer's ``poll_async`` / ``receive_async`` calls that found nothing yet.

A waiter is completed by whichever comes first: a pull reply that brings something (on the client's
I/O thread), its timer (``Channel.call_later``, the same thread), or the consumer's close. Nothing is
taken for a waiter until its future is marked running (``set_running_or_notify_cancel``), so a
future cancelled before then takes nothing: what it would have got stays for the next call.

The owner holds its own lock around ``add``, ``serve``, ``remove`` and ``drain`` (they touch its
buffers through ``take``), and completes the futures they return after letting go of it
(``settle``): a future's done-callbacks run in the thread that completes it, and must not run with
the consumer's lock held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

Completion = tuple[Future[Any], Any, BaseException | None]


@dataclass(slots=True, eq=False)
class Waiter(Generic[T]):
    future: Future[T]
    take: Callable[[], T]   # hands over what is buffered (called once the future is running)
    empty: T                # the answer when nothing came
    timer: Future[None] | None = None


class Waiters:
    def __init__(self) -> None:
        self._queue: deque[Waiter[Any]] = deque()

    def __bool__(self) -> bool:
        return bool(self._queue)

    def add(self, waiter: Waiter[Any]) -> None:
        self._queue.append(waiter)

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

    def remove(self, waiter: Waiter[Any]) -> list[Completion]:
        """A waiter whose time ran out: answered with nothing, unless already served or cancelled."""
        try:
            self._queue.remove(waiter)
        except ValueError:
            return []
        return [(waiter.future, waiter.empty, None)] if waiter.future.set_running_or_notify_cancel() else []

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
    """Complete the futures ``serve``, ``remove`` or ``drain`` gave (without the owner's lock held)."""
    for future, value, error in done:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


def completed(value: T) -> Future[T]:
    future: Future[T] = Future()
    future.set_result(value)
    return future


def failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future
