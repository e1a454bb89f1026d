"""Admin's key queries: the fields of a ``query_key`` and a ``query_keys`` request, a ``query_keys``
reply cut into one batch per key, one form for the waiting and the async calls; and the readers they
go to (``QueryReaders``)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from ipc.channel import Channel
from ipc.endpoints import Endpoints
from ipc.messages import MessageBatch, ReplyError

LONG_MAX = (1 << 63) - 1
MAX_READERS = 64  # what a broker's configuration allows


def key_query(topic: str, key: str, max_count: int, begin_ms: int, end_ms: int | None) -> dict[str, Any]:
    """A ``query_key`` request's fields, the fewest that say it: a time range only when it is not the
    reader's default (all of time); the messages come packed (``raw``)."""
    fields: dict[str, Any] = {"topic": topic, "key": key, "max": max_count, "raw": True}
    if begin_ms or end_ms is not None:
        fields.update(begin_ms=begin_ms, end_ms=LONG_MAX if end_ms is None else end_ms)
    return fields


def keys_query(topic: str, keys: Sequence[str], max_count: int, begin_ms: int, end_ms: int | None
               ) -> dict[str, Any]:
    return {"topic": topic, "keys": list(keys), "max": max_count, "begin_ms": begin_ms,
            "end_ms": LONG_MAX if end_ms is None else end_ms}


def per_key(key_count: int, reply: dict[str, Any], batch: MessageBatch) -> list[MessageBatch]:
    """A ``query_keys`` reply's messages cut into one batch per key, by its ``counts``."""
    counts = reply.get("counts")
    if (not isinstance(counts, list) or len(counts) != key_count
            or not all(type(c) is int and c >= 0 for c in counts) or sum(counts) != len(batch)):
        raise ReplyError(f"{key_count} keys, {len(batch)} messages, counts {counts!r}")
    starts = [0, *itertools.accumulate(counts)]
    return [batch[starts[i]:starts[i + 1]] for i in range(key_count)]


class QueryReaders:
    """Where Admin's key queries go: reader 0 until a reply says the broker runs more readers, then
    all of them in turn, on a channel of their own whose route names every reader (a DEALER sends to
    each of its peers in turn). Any reader answers a key query alike, each mapping the whole index
    and log read-only, and one reader serving every lookup was what bounded the one-key rate.

    A query reply carries ``readers`` (how many the broker runs), so learning costs no request: the
    first query goes to reader 0, and the ones after it go round."""

    def __init__(self, admin: Channel, endpoints: Endpoints, timeout_ms: int) -> None:
        self._admin = admin
        self._endpoints = endpoints
        self._timeout_ms = timeout_ms
        self._lock = threading.Lock()
        self._readers = 0      # as the first reply that said it; 0 until then
        self._spread: Channel | None = None
        self._closed = False

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """``op`` made on the calling thread (``Channel.request``) on the next reader's turn."""
        channel, route = self._route()
        reply = channel.request(route, op, timeout_ms=self._timeout_ms, **fields)
        if not self._readers:
            self._learn(reply)
        return reply

    def call(self, op: str, **fields: Any) -> Future[dict[str, Any]]:
        """``op`` without waiting (``Channel.call``) on the next reader's turn."""
        channel, route = self._route()
        future = channel.call(route, op, timeout_ms=self._timeout_ms, **fields)
        if not self._readers:
            future.add_done_callback(lambda done: None if done.exception() else self._learn(done.result()))
        return future

    def close(self) -> None:
        with self._lock:
            self._closed = True
            spread, self._spread = self._spread, None
        if spread is not None:
            spread.close()

    def _learn(self, reply: dict[str, Any]) -> None:
        # once: a reply without the count (an older reader) leaves the queries on reader 0
        readers = reply.get("readers")
        self._readers = min(readers, MAX_READERS) if type(readers) is int and readers > 0 else 1

    def _route(self) -> tuple[Channel, str]:
        if self._spread is not None:
            return self._spread, "readers"
        if self._readers <= 1:
            return self._admin, "reader"
        with self._lock:  # made on a caller's thread, never on a channel's I/O thread
            if self._spread is None and not self._closed:
                ep = self._endpoints
                self._spread = Channel({"readers": [ep.reader(i) for i in range(self._readers)]},
                                       name="mqstore-admin-queries", curve=ep.curve)
        return (self._admin, "reader") if self._spread is None else (self._spread, "readers")
