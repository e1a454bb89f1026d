"""``mqstore.aio.Consumer``: the ``Consumer``'s polls awaited on an event loop, and ``async for``.

Each poll is the blocking consumer's own ``poll_async`` (a future served on its I/O thread when
messages come or the time runs out), awaited through ``handed``: a task cancelled while it waits
(``task.cancel()``, ``asyncio.timeout``) takes nothing, and should the I/O thread have served it
just before, each queue it took from is sought back to the first message it took, so they come
again and no commit passes them. What a consumer hands over is exactly what the application got.

``position``, ``seek`` and ``buffered`` read or set the consumer's own bookkeeping and ask nothing
of the broker: they stay plain calls. The constructor only sends reader 0 the questions of the
topic's queues and the group's offsets, as the blocking one does; ``async with`` (or ``ready``)
awaits their answers, and so does the first poll. The local calls made before that wait for them
on the loop's thread (one round trip).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Self

from mqstore.ipc.client import consumer
from mqstore.ipc.client.aio.handover import handed
from mqstore.ipc.client.consumer import (
    ITERATION_WAIT_MS,
    MAX_BYTES_PER_PULL,
    MAX_PER_PULL,
    PREFETCH_BYTES,
    PREFETCH_MESSAGES,
    START_COMMITTED,
)
from mqstore.ipc.transport.channel import CLOSED, BrokerError
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.messages import MessageBatch, ReceivedMessage


class Consumer:
    """``mqstore.Consumer`` for asyncio: the same arguments; polls, commits and close awaited."""

    def __init__(self, store_dir: str | os.PathLike[str] | None = None, *, group: str, topic: str,
                 queues: list[int] | None = None, tags: str = "*", start: str = START_COMMITTED,
                 long_poll_ms: int = 1000, endpoints: Endpoints | None = None, reader_count: int = 1,
                 auto_commit: bool = True, auto_commit_interval_ms: int = 5000, timeout_ms: int = 3000,
                 max_per_pull: int = MAX_PER_PULL, max_bytes_per_pull: int = MAX_BYTES_PER_PULL,
                 prefetch_messages: int = PREFETCH_MESSAGES, prefetch_bytes: int = PREFETCH_BYTES,
                 trace: bool = False) -> None:
        self._consumer = consumer.Consumer(
            store_dir, group=group, topic=topic, queues=queues, tags=tags, start=start, long_poll_ms=long_poll_ms,
            endpoints=endpoints, reader_count=reader_count, auto_commit=auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms, timeout_ms=timeout_ms, max_per_pull=max_per_pull,
            max_bytes_per_pull=max_bytes_per_pull, prefetch_messages=prefetch_messages,
            prefetch_bytes=prefetch_bytes, trace=trace)
        self._auto_commit = auto_commit
        self._closed = False

    @property
    def group(self) -> str:
        return self._consumer.group

    @property
    def topic(self) -> str:
        return self._consumer.topic

    @property
    def queues(self) -> list[int]:
        return self._consumer.queues

    def position(self, queue_id: int) -> int:
        return self._consumer.position(queue_id)

    def seek(self, queue_id: int, queue_offset: int) -> None:
        self._consumer.seek(queue_id, queue_offset)

    def buffered(self, queue_id: int) -> tuple[int, int]:
        return self._consumer.buffered(queue_id)

    async def ready(self) -> None:
        """Await the queues and where the consumer starts on each; raises what prevented them."""
        await asyncio.wrap_future(self._consumer.ready_async())

    async def poll(self, timeout_ms: int = 1000, max_count: int | None = None) -> list[ReceivedMessage]:
        """Messages available now, or the first to arrive within ``timeout_ms``; [] when none came."""
        return await handed(self._consumer.poll_async(timeout_ms, max_count), self._give_back)

    async def poll_batch(self, timeout_ms: int = 1000, max_count: int | None = None) -> MessageBatch:
        """``poll`` as the readers answered it: decoded when touched."""
        return await handed(self._consumer.poll_batch_async(timeout_ms, max_count), self._give_back)

    async def messages(self, max_count: int, timeout_ms: int = 1000) -> list[ReceivedMessage]:
        """Up to ``max_count`` messages, waiting at most ``timeout_ms`` in all."""
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        out: list[ReceivedMessage] = []
        while len(out) < max_count:
            remaining_ms = int((deadline - asyncio.get_running_loop().time()) * 1000)
            got = await self.poll(max(0, remaining_ms), max_count - len(out))
            out.extend(got)
            if not got and remaining_ms <= 0:
                break
        return out

    async def commit(self) -> None:
        """Store every queue's position as the group's offset (reader 0)."""
        await asyncio.wrap_future(self._consumer.commit_async())

    async def close(self) -> None:
        """Commit (with ``auto_commit``), end every poll and ``async for`` waiting, close the sockets."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._auto_commit:
                await self.commit()  # awaited here, so the blocking close finds nothing left to commit
        finally:
            self._consumer.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ReceivedMessage:
        """The next message, waiting as long as it takes; the iteration ends once the consumer is
        closed (by another task, or inside the loop). One message is handed over at a time, so a
        close commits nothing the loop has not had."""
        while True:
            try:
                got = await self.poll(ITERATION_WAIT_MS, 1)
            except BrokerError as exc:
                if exc.status == CLOSED:
                    raise StopAsyncIteration from None
                raise
            if got:
                return got[0]

    async def __aenter__(self) -> Self:
        try:
            await self.ready()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _give_back(self, taken: Sequence[ReceivedMessage]) -> None:
        """Messages served to a poll whose task was cancelled: each queue back to the first of them."""
        first: dict[int, int] = {}
        for message in taken:
            first[message.queue_id] = min(first.get(message.queue_id, message.queue_offset), message.queue_offset)
        for queue_id, queue_offset in first.items():
            self._consumer.seek(queue_id, queue_offset)
