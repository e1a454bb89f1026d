"""``mqstore.aio.Producer``: the ``Producer``'s sends awaited on an event loop.

Each send is the blocking client's own ``*_async`` call (``mqstore.ipc.client.api``), whose future
completes on the client's I/O thread; ``asyncio.wrap_future`` hands its result to the loop. No
executor, no thread per call. A task cancelled while it awaits a send stops waiting and nothing
else: the request is on its way, and the message may be stored, as after a timeout.

Transactional sends take coroutine functions. ``execute_local`` runs as a task on the loop that
awaits ``send_transactional`` once the half is stored (the I/O thread starts it there and goes on);
the end goes out when it returns. ``check_back`` runs on that loop too: the producer's checks'
thread hands the check over and waits for its answer at most ``timeout_ms`` (a later answer is
dropped, and the broker asks again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Self

from mqstore.ipc.client import api
from mqstore.ipc.client.admin import DEFAULT_TIMEOUT_MS, StorePath
from mqstore.ipc.client.in_flight import FlushTimeoutError
from mqstore.ipc.client.transactions import TransactionResult, TransactionState
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.encoded import SendResults
from mqstore.ipc.wire.messages import Outgoing, ReceivedMessage, SendResult

ExecuteLocal = Callable[[Outgoing, SendResult], Coroutine[Any, Any, TransactionState]]
CheckBack = Callable[[ReceivedMessage], Coroutine[Any, Any, TransactionState]]


class Producer:
    """``mqstore.Producer`` for asyncio: the same arguments, every send awaitable."""

    def __init__(self, store_dir: StorePath | None = None, *, endpoints: Endpoints | None = None,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS, retries: int = 2, retry_backoff_ms: int = 100,
                 heartbeat_ms: int = 30_000) -> None:
        self._producer = api.Producer(store_dir, endpoints=endpoints, timeout_ms=timeout_ms, retries=retries,
                                      retry_backoff_ms=retry_backoff_ms, heartbeat_ms=heartbeat_ms)
        self._timeout_s = timeout_ms / 1000
        self._prepared: Future[None] | None = None

    async def send(self, topic: str, body: bytes, *, tags: str | None = None, keys: str | Sequence[str] = (),
                   properties: Mapping[str, str] | None = None, queue_id: int | None = None,
                   shard: str | None = None) -> SendResult:
        await self._prepare()
        return await asyncio.wrap_future(self._producer.send_async(
            topic, body, tags=tags, keys=keys, properties=properties, queue_id=queue_id, shard=shard))

    async def send_batch(self, messages: Sequence[Outgoing | Mapping[str, Any]]) -> list[SendResult]:
        """One request for many messages (one commitlog append); one result per message, in order."""
        await self._prepare()
        return await asyncio.wrap_future(self._producer.send_batch_async(messages))

    async def send_encoded(self, messages: Sequence[Outgoing | Mapping[str, Any]]) -> SendResults:
        """``Producer.send_encoded``: the records encoded here (on the loop), whole."""
        await self._prepare()
        return await asyncio.wrap_future(self._producer.send_encoded_async(messages))

    async def send_encoded_columns(self, topic: str, bodies: Sequence[bytes], *,
                                   tags: str | Sequence[str | None] | None = None,
                                   keys: Sequence[Sequence[str]] | None = None) -> SendResults:
        await self._prepare()
        return await asyncio.wrap_future(self._producer.send_encoded_columns_async(topic, bodies, tags=tags,
                                                                                   keys=keys))

    async def send_transactional(self, message: Outgoing, execute_local: ExecuteLocal, check_back: CheckBack, *,
                                 group: str) -> TransactionResult:
        """``Producer.send_transactional`` with coroutine functions, run on this loop (the module's
        docstring). A task cancelled meanwhile does not stop the transaction: the half, the local
        transaction and its end go on."""
        loop = asyncio.get_running_loop()

        def start_local(sent: Outgoing, result: SendResult) -> Future[TransactionState]:
            return asyncio.run_coroutine_threadsafe(execute_local(sent, result), loop)

        def check(stored: ReceivedMessage) -> TransactionState:
            return _answer_on(loop, check_back(stored), self._timeout_s)

        await self._prepare()
        return await asyncio.wrap_future(self._producer.send_transactional_async(message, start_local, check,
                                                                                 group=group))

    async def end_transaction(self, half: SendResult, state: TransactionState, *, group: str) -> None:
        await asyncio.wrap_future(self._producer.end_transaction_async(half, state, group=group))

    async def _prepare(self) -> None:
        """The writer's encoding and request limit, asked once before the first send, so that no
        send waits for them on the loop."""
        if self._prepared is None or (self._prepared.done() and self._prepared.exception() is not None):
            self._prepared = self._producer.prepare_async()
        if not self._prepared.done():
            await asyncio.wrap_future(self._prepared)

    async def flush(self, timeout_s: float | None = None) -> None:
        """``Producer.flush``: every send made before the call answered (each awaitable's own outcome),
        or FlushTimeoutError naming how many are not once ``timeout_s`` has passed. A send whose
        task was cancelled is still in flight until answered, and flushed."""
        flushing = self._producer.flush_async()
        if not flushing.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(flushing)), timeout_s)
        flushing.check(timeout_s or 0.0)

    async def close(self, timeout_s: float | None = None) -> None:
        """``Producer.close``: a flush of at most ``timeout_s`` (by default the longest one send can
        take; ``0``: none), then the sockets closed (sends still waiting raise BrokerError CLOSED)
        and the checks already handed to the checks' thread waited for. ``async with`` closes so
        on leaving, on an exception too (as aiokafka's ``stop`` does)."""
        if timeout_s is None:
            timeout_s = self._producer.send_bound_s
        try:
            if timeout_s > 0:
                with contextlib.suppress(FlushTimeoutError):
                    await self.flush(timeout_s)
        finally:  # a flush cancelled still closes
            await asyncio.wrap_future(self._producer.close_async())

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _answer_on(loop: asyncio.AbstractEventLoop, answer: Coroutine[Any, Any, TransactionState],
               timeout_s: float) -> TransactionState:
    """Run ``answer`` on ``loop`` from another thread and wait for it at most ``timeout_s``."""
    try:
        future = asyncio.run_coroutine_threadsafe(answer, loop)
    except RuntimeError:  # the loop is closed
        answer.close()
        raise
    try:
        return future.result(timeout_s)
    finally:
        future.cancel()  # nothing once it is done
