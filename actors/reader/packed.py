"""A pull's reply: the records as stored, back to back, and their columns (packed), or as maps; each
pull's deliveries counted for the metrics."""

from __future__ import annotations

import time
from typing import Any

from mqstore.actors.meters import Deliveries
from mqstore.actors.reader.long_poll import PullRequest
from mqstore.engine.read.lookup import GetResult, StoredRecords
from mqstore.ipc.wire import replies
from mqstore.ipc.wire.messages import pack_columns, record_to_wire

NONE_STORED = StoredRecords(b"", [], [], [])


def packed(stored: StoredRecords) -> tuple[int, bytes, bytes]:
    """A packed reply's ``count``, ``cols`` and records (``mqstore.ipc.wire.messages.stored_parts``' fields)."""
    return len(stored.sizes), pack_columns(stored.queue_offsets, stored.phys_offsets, stored.sizes), stored.data


def pull_reply(request_id: Any, pull: PullRequest, result: GetResult, delivered: Deliveries) -> dict[str, Any]:
    """A ``pull``'s reply map with ``result``: packed with ``raw``, else the messages as maps."""
    replied_us = time.time_ns() // 1000 if pull.trace else None
    if pull.raw:  # one blob and its columns: nothing per message on either side
        stored = result.stored or NONE_STORED
        if stored.sizes:
            delivered.add(pull.group, pull.topic, len(stored), len(stored.data))
        return replies.PackedPullReply(result.status.value, result.next_queue_offset, result.min_queue_offset,
                                       result.max_queue_offset, *packed(stored), replied_us).encode(request_id)
    if result.messages:
        delivered.add(pull.group, pull.topic, len(result.messages), sum(r.size for r in result.messages))
    return replies.PullReply(result.status.value, result.next_queue_offset, result.min_queue_offset,
                             result.max_queue_offset, [record_to_wire(r) for r in result.messages], replied_us
                             ).encode(request_id)
