"""``mqstore.aio.Admin``: every ``Admin`` call awaitable, each the blocking client's own ``*_async``
call (a future completed on its I/O thread) handed to the loop by ``asyncio.wrap_future``. A task
cancelled while it awaits a call stops waiting; the request still goes through (a topic created,
an offset committed), as after a timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Self

from mqstore.ipc.client import admin
from mqstore.ipc.client.admin import DEFAULT_TIMEOUT_MS, StorePath
from mqstore.ipc.transport.endpoints import Endpoints
from mqstore.ipc.wire.group_lag import QueueLag
from mqstore.ipc.wire.messages import MessageBatch, ReceivedMessage
from mqstore.ipc.wire.replies import AckQueueStats, PurgeQueuesReply


class Admin:
    """``mqstore.Admin`` for asyncio: the same arguments, the same calls, awaited."""

    def __init__(self, store_dir: StorePath | None = None, *, endpoints: Endpoints | None = None,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self._admin = admin.Admin(store_dir, endpoints=endpoints, timeout_ms=timeout_ms)

    async def topics(self) -> dict[str, int]:
        return await asyncio.wrap_future(self._admin.topics_async())

    async def create_topic(self, topic: str, queues: int) -> int:
        return await asyncio.wrap_future(self._admin.create_topic_async(topic, queues))

    async def delete_topic(self, topic: str) -> bool:
        return await asyncio.wrap_future(self._admin.delete_topic_async(topic))

    async def groups(self) -> dict[str, list[str]]:
        return await asyncio.wrap_future(self._admin.groups_async())

    async def group_describe(self, group: str) -> list[QueueLag]:
        return await asyncio.wrap_future(self._admin.group_describe_async(group))

    async def group_last_seen_ms(self) -> dict[str, int]:
        return await asyncio.wrap_future(self._admin.group_last_seen_ms_async())

    async def ack_stats(self) -> list[AckQueueStats]:
        return await asyncio.wrap_future(self._admin.ack_stats_async())

    async def reset_offset(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        await asyncio.wrap_future(self._admin.reset_offset_async(group, topic, queue_id, queue_offset))

    async def delete_topic_offsets(self, topic: str) -> bool:
        return await asyncio.wrap_future(self._admin.delete_topic_offsets_async(topic))

    async def queue_info(self, topic: str) -> dict[int, tuple[int, int]]:
        return await asyncio.wrap_future(self._admin.queue_info_async(topic))

    async def query_by_key(self, topic: str, key: str, max_count: int = 64, begin_ms: int = 0,
                           end_ms: int | None = None) -> MessageBatch:
        return await asyncio.wrap_future(self._admin.query_by_key_async(topic, key, max_count, begin_ms, end_ms))

    async def query_keys(self, topic: str, keys: Sequence[str], max_count: int = 64, begin_ms: int = 0,
                         end_ms: int | None = None) -> list[MessageBatch]:
        return await asyncio.wrap_future(self._admin.query_keys_async(topic, keys, max_count, begin_ms, end_ms))

    async def query_by_uniq_key(self, topic: str, uniq_key: str) -> list[ReceivedMessage]:
        return await asyncio.wrap_future(self._admin.query_by_uniq_key_async(topic, uniq_key))

    async def view_by_id(self, msg_id: str) -> ReceivedMessage | None:
        return await asyncio.wrap_future(self._admin.view_by_id_async(msg_id))

    async def offset_by_time(self, topic: str, queue_id: int, ts_ms: int, *, upper: bool = False) -> int:
        return await asyncio.wrap_future(self._admin.offset_by_time_async(topic, queue_id, ts_ms, upper=upper))

    async def fetch_offset(self, group: str, topic: str, queue_id: int) -> int:
        return await asyncio.wrap_future(self._admin.fetch_offset_async(group, topic, queue_id))

    async def commit_offset(self, group: str, topic: str, queue_id: int, queue_offset: int) -> None:
        await asyncio.wrap_future(self._admin.commit_offset_async(group, topic, queue_id, queue_offset))

    async def ping(self) -> dict[str, Any]:
        return await asyncio.wrap_future(self._admin.ping_async())

    async def ping_writer(self) -> dict[str, Any]:
        return await asyncio.wrap_future(self._admin.ping_writer_async())

    async def purge_queues(self, topic: str, queue_ids: Sequence[int] | None = None) -> PurgeQueuesReply:
        return await asyncio.wrap_future(self._admin.purge_queues_async(topic, queue_ids))

    async def persist_offsets(self) -> bool:
        return await asyncio.wrap_future(self._admin.persist_offsets_async())

    async def read_queue(self, topic: str, queue_id: int, queue_offset: int, max_count: int = 32
                         ) -> tuple[MessageBatch, int, int]:
        return await asyncio.wrap_future(self._admin.read_queue_async(topic, queue_id, queue_offset, max_count))

    async def topic_stats(self, topic: str) -> dict[int, tuple[int, int, int]]:
        return await asyncio.wrap_future(self._admin.topic_stats_async(topic))

    async def delete_group(self, group: str, live_ms: int) -> tuple[list[str], list[tuple[str, int]]]:
        return await asyncio.wrap_future(self._admin.delete_group_async(group, live_ms))

    async def ack_group_stats(self, group: str) -> list[AckQueueStats]:
        return await asyncio.wrap_future(self._admin.ack_group_stats_async(group))

    async def close(self) -> None:
        """Close the sockets: calls still waiting raise BrokerError CLOSED. Quick: nothing to wait for
        but the client's I/O thread, which stops at once."""
        self._admin.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
