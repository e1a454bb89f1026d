"""A consumer's assignment: the queues it reads and where it starts on each, asked of reader 0
without waiting (the topic's queues, then the group's committed offsets when it starts there).

The consumer's constructor only sends the first request; the rest is chained on the client's I/O
thread, so constructing a consumer never blocks the caller (an event loop, for ``mqstore.aio``) and
a broker that is not there is heard of at the first poll, as a BrokerTimeoutError.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from mqstore.ipc.client.futures import every, guarded
from mqstore.ipc.wire.replies import OffsetReply, QueueInfoReply
from mqstore.ipc.wire.requests import FetchOffset, QueueInfo, Request

START_COMMITTED = "committed"
START_EARLIEST = "earliest"
START_LATEST = "latest"

Call = Callable[[Request], "Future[dict[str, Any]]"]  # a request to reader 0


def assign(call: Call, group: str, topic: str, queues: list[int] | None, start: str
           ) -> Future[dict[int, tuple[int, int]]]:
    """Queue id -> (the first offset to deliver, the group's committed offset or -1): ``queues``, or
    every queue the topic has now (none when it does not exist yet)."""
    assigned: Future[dict[int, tuple[int, int]]] = Future()
    assigned.set_running_or_notify_cancel()

    @guarded(assigned)
    def spans_came(reply: Future[dict[str, Any]]) -> None:
        spans = QueueInfoReply.decode(reply.result()).queues
        queue_ids = sorted(spans) if queues is None else sorted(set(queues))
        fetched = queue_ids if start == START_COMMITTED else []
        fetches = [call(FetchOffset(group, topic, q)) for q in fetched]

        @guarded(assigned)
        def offsets_came(replies: Future[list[dict[str, Any]]]) -> None:
            committed = {q: OffsetReply.decode(r).offset for q, r in zip(fetched, replies.result(), strict=True)}
            firsts = {}
            for q in queue_ids:
                lo, hi = spans.get(q, (0, 0))
                known = committed.get(q, -1)
                firsts[q] = ({START_EARLIEST: lo, START_LATEST: hi}.get(start, known if known >= 0 else lo), known)
            assigned.set_result(firsts)

        every(fetches).add_done_callback(offsets_came)

    call(QueueInfo(topic)).add_done_callback(spans_came)
    return assigned
