"""A consumer group's progress on one queue as reader 0's ``group_describe`` reply carries it.

The reply's map (``queues``: one per queue) keeps the names it has always had on the wire; the client
hands applications the engine's ``QueueLag`` (``mqstore.engine.read.group_lag``) under its own names::

    topic, queue (-> queue_id), committed_offset, min_offset (-> min_queue_offset),
    max_offset (-> max_queue_offset), lag, last_consume_ms
"""

from __future__ import annotations

from typing import Any

from mqstore.engine.read.group_lag import QueueLag
from mqstore.ipc.wire.messages import ReplyError

__all__ = ["QueueLag", "lag_from_wire", "lag_to_wire", "lags_from_wire"]


def lag_to_wire(lag: QueueLag) -> dict[str, Any]:
    return {"topic": lag.topic, "queue": lag.queue_id, "committed_offset": lag.committed_offset,
            "min_offset": lag.min_queue_offset, "max_offset": lag.max_queue_offset, "lag": lag.lag,
            "last_consume_ms": lag.last_consume_ms}


def lag_from_wire(raw: Any) -> QueueLag:
    """Raises ReplyError when ``raw`` is not one queue's map."""
    if not isinstance(raw, dict):
        raise ReplyError(f"a queue's progress must be a map, got {type(raw).__name__}")
    try:
        return QueueLag(str(raw["topic"]), int(raw["queue"]), int(raw["committed_offset"]), int(raw["min_offset"]),
                        int(raw["max_offset"]), int(raw["lag"]), int(raw["last_consume_ms"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ReplyError(f"malformed queue progress {raw!r}: {exc!r}") from None


def lags_from_wire(raw: Any) -> list[QueueLag]:
    """A ``group_describe`` reply's ``queues``; raises ReplyError when it is not a list of them."""
    if not isinstance(raw, list):
        raise ReplyError(f"a group's queues must be a list, got {type(raw).__name__}")
    return [lag_from_wire(q) for q in raw]
