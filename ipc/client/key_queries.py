"""Admin's key queries: a ``query_key`` and a ``query_keys`` request, and a
``query_keys`` reply cut into one batch per key; one form for the waiting and the async calls."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from mqstore.ipc.wire.messages import MessageBatch, ReplyError
from mqstore.ipc.wire.replies import PackedRecordsReply
from mqstore.ipc.wire.requests import QueryKey, QueryKeys

LONG_MAX = (1 << 63) - 1


def key_query(topic: str, key: str, max_count: int, begin_ms: int, end_ms: int | None) -> QueryKey:
    """A ``query_key`` request, the fewest fields that say it: a time range only when it is not the
    reader's default (all of time); the messages come packed (``raw``)."""
    if begin_ms or end_ms is not None:
        return QueryKey(topic, key, max_count, True, begin_ms, LONG_MAX if end_ms is None else end_ms)
    return QueryKey(topic, key, max_count, True)


def keys_query(topic: str, keys: Sequence[str], max_count: int, begin_ms: int, end_ms: int | None) -> QueryKeys:
    return QueryKeys(topic, tuple(keys), max_count, begin_ms, LONG_MAX if end_ms is None else end_ms)


def per_key(key_count: int, reply: PackedRecordsReply) -> list[MessageBatch]:
    """A ``query_keys`` reply's messages cut into one batch per key, by its ``counts``."""
    batch, counts = reply.batch(), reply.counts
    if counts is None or len(counts) != key_count or sum(counts) != len(batch):
        raise ReplyError(f"{key_count} keys, {len(batch)} messages, counts {counts!r}")
    starts = [0, *itertools.accumulate(counts)]
    return [batch[starts[i]:starts[i + 1]] for i in range(key_count)]
