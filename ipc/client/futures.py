"""Futures chained by callbacks: how the clients' ``*_async`` calls build one answer out of several
replies without a thread waiting on any of them. A step runs on the thread that completes the
future before it (the client's I/O thread, for a reply), so a step is quick and never waits.
``mqstore.aio`` awaits the results with ``asyncio.wrap_future``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

S = TypeVar("S")
T = TypeVar("T")

__all__ = ["chain", "completed", "every", "failed", "guarded", "then"]


def completed(value: T) -> Future[T]:
    """A future that holds ``value`` already."""
    future: Future[T] = Future()
    future.set_result(value)
    return future


def failed(error: BaseException) -> Future[Any]:
    """A future that holds ``error`` already."""
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


def then(first: Future[S], step: Callable[[S], T]) -> Future[T]:
    """A future of ``step(first's result)``: an exception of ``first`` or of ``step`` is its exception."""
    outer: Future[T] = Future()
    outer.set_running_or_notify_cancel()

    def done(answered: Future[S]) -> None:
        try:
            outer.set_result(step(answered.result()))
        except BaseException as exc:
            outer.set_exception(exc)

    first.add_done_callback(done)
    return outer


def chain(first: Future[Any], step: Callable[[], Future[T]]) -> Future[T]:
    """A future of the future ``step()`` makes once ``first`` is done: ``first``'s exception, or the
    exception of ``step`` or of its future, is its exception."""
    outer: Future[T] = Future()
    outer.set_running_or_notify_cancel()

    @guarded(outer)
    def started(done: Future[Any]) -> None:
        done.result()
        step().add_done_callback(guarded(outer)(lambda second: outer.set_result(second.result())))

    first.add_done_callback(started)
    return outer


def every(futures: list[Future[T]]) -> Future[list[T]]:
    """A future of every result, in order, once all are in; the first exception, in order, if any."""
    outer: Future[list[T]] = Future()
    outer.set_running_or_notify_cancel()
    left = [len(futures)]
    lock = threading.Lock()  # a future done already runs its callback on the adding thread

    def done(_: Future[T]) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            try:
                outer.set_result([f.result() for f in futures])
            except BaseException as exc:
                outer.set_exception(exc)

    if not futures:
        outer.set_result([])
    for future in futures:
        future.add_done_callback(done)
    return outer


def guarded(outer: Future[Any]) -> Callable[[Callable[[Future[S]], None]], Callable[[Future[S]], None]]:
    """A decorator for one step of a chain that ends in ``outer``: whatever the step raises fails
    ``outer`` instead of being lost in the thread that ran the step."""
    def wrap(step: Callable[[Future[S]], None]) -> Callable[[Future[S]], None]:
        def run(future: Future[S]) -> None:
            try:
                step(future)
            except BaseException as exc:
                if not outer.done():
                    outer.set_exception(exc)
        return run
    return wrap
