"""``mqstore.aio.AckConsumer``: the ``AckConsumer``'s receives, acks and nacks awaited on an event
loop, and ``async for``.

Each call is the blocking consumer's own ``*_async`` future, awaited. A receive whose task is
cancelled while it waits takes nothing; should the I/O thread have served it just before
(``handed``), its deliveries are kept here and are the next receive's, and a close gives them back
to the broker with every other unsettled one. An ack or nack whose task is cancelled still goes
out. ``close`` gives the deliveries back in one round trip made on the calling thread, as the
blocking one does, at most ``timeout_ms``.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Iterable
from typing import Self

from mqstore.ipc.client import ack_consumer
from mqstore.ipc.client.ack_consumer import ITERATION_WAIT_MS
from mqstore.ipc.client.aio.handover import handed
from mqstore.ipc.transport.channel import CLOSED, BrokerError
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.receipts import AckStatus, Delivery, Receipt


class AckConsumer:
    """``mqstore.AckConsumer`` for asyncio: the same arguments; receive, ack, nack and close awaited."""

    def __init__(self, store_dir: str | os.PathLike[str] | None = None, *, group: str, topic: str,
                 queues: list[int] | None = None, consumer_id: str | None = None, prefetch: int | None = None,
                 visibility_ms: int | None = None, tags: str = "*", long_poll_ms: int = 1000,
                 endpoints: Endpoints | None = None, reader_count: int | None = None, timeout_ms: int = 3000,
                 max_per_pull: int = 32) -> None:
        self._consumer = ack_consumer.AckConsumer(
            store_dir, group=group, topic=topic, queues=queues, consumer_id=consumer_id, prefetch=prefetch,
            visibility_ms=visibility_ms, tags=tags, long_poll_ms=long_poll_ms, endpoints=endpoints,
            reader_count=reader_count, timeout_ms=timeout_ms, max_per_pull=max_per_pull)
        # served to a receive whose task was cancelled (appended on the I/O thread, taken on the loop)
        self._kept: deque[Delivery] = deque()

    @property
    def group(self) -> str:
        return self._consumer.group

    @property
    def topic(self) -> str:
        return self._consumer.topic

    @property
    def consumer_id(self) -> str:
        return self._consumer.consumer_id

    @property
    def queues(self) -> list[int]:
        return self._consumer.queues

    async def receive(self, max_count: int = 32, timeout_ms: int = 1000) -> list[Delivery]:
        """Deliveries available now, or the first to arrive within ``timeout_ms``; [] when none came.
        Each must be acked (or nacked) within the visibility timeout."""
        if self._kept and max_count >= 1:
            return [self._kept.popleft() for _ in range(min(max_count, len(self._kept)))]
        return await handed(self._consumer.receive_async(max_count, timeout_ms), self._kept.extend)

    async def ack(self, items: Delivery | Receipt | Iterable[Delivery | Receipt]) -> list[AckStatus]:
        return await asyncio.wrap_future(self._consumer.ack_async(items))

    async def nack(self, items: Delivery | Receipt | Iterable[Delivery | Receipt], *,
                   requeue: bool = True) -> list[AckStatus]:
        return await asyncio.wrap_future(self._consumer.nack_async(items, requeue=requeue))

    async def close(self) -> None:
        """Leave the group: what is not acked yet is handed out again at once; ``async for`` ends."""
        self._consumer.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Delivery:
        """The next delivery, waiting as long as it takes; ends once the consumer is closed."""
        while True:
            try:
                got = await self.receive(1, ITERATION_WAIT_MS)
            except BrokerError as exc:
                if exc.status == CLOSED:
                    raise StopAsyncIteration from None
                raise
            if got:
                return got[0]

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
