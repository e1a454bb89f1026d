"""How ``mqstore.aio``'s consumers await their blocking consumer's futures without losing a message.

A consumer's ``poll_async`` / ``receive_async`` future takes messages from the consumer's buffer only
once it is served (``mqstore.ipc.client.waiters``): cancelled before that, it takes nothing. But a
task can be cancelled after the I/O thread served its future and before the loop ran the task
again (``asyncio.wrap_future`` delivers a result one loop step later), and then the result would be
dropped with the task's ``CancelledError``: messages taken for nobody. ``handed`` closes that gap:
a future done already is returned at once, with no await and so no cancellation between; a
cancelled await cancels the future if it can (nothing taken), and otherwise gives what it took
back to the consumer (``give_back``), on whichever thread completes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

__all__ = ["handed"]


async def handed(future: Future[T], give_back: Callable[[T], None]) -> T:
    if future.done():
        return future.result()
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if not future.cancel():  # served already: what it took goes back
            future.add_done_callback(lambda served: _give_back(served, give_back))
        raise


def _give_back(served: Future[T], give_back: Callable[[T], None]) -> None:
    if not served.cancelled() and served.exception() is None:
        give_back(served.result())
