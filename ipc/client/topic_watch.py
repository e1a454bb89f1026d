"""A consumer's watch on its topic's queues: one ``watch_queues`` request in flight on reader 0.

A consumer that follows every queue of its topic (no ``queues=[...]``) starts with the queues the
topic has, none if it does not exist yet, and keeps a watch out naming them: reader 0 answers it
as soon as the topic has another queue (``mqstore.actors.reader.topic_watch``), or after
``WATCH_WAIT_MS`` with nothing new, and the next goes out at once. So an idle consumer sends one
watch per ``WATCH_WAIT_MS``, and learns of a new queue when it appears. Everything here runs on
the client's I/O thread (reply callbacks and timers); ``on_queues`` gets the topic's queues and
returns the queue ids the consumer now follows.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from mqstore.ipc.transport.channel import CLOSED, BrokerError, BrokerTimeoutError, Channel
from mqstore.ipc.wire.messages import ReplyError
from mqstore.ipc.wire.replies import QueueInfoReply
from mqstore.ipc.wire.requests import WatchQueues

log = logging.getLogger("mqstore.client")

WATCH_WAIT_MS = 25_000        # within the broker's [broker] long_poll_max_ms (30 s by default)
WATCH_ERROR_BACKOFF_MS = 1_000

OnQueues = Callable[[dict[int, tuple[int, int]]], Iterable[int]]


class TopicWatch:
    def __init__(self, channel: Channel, topic: str, timeout_ms: int, on_queues: OnQueues) -> None:
        self._channel = channel
        self._topic = topic
        self._timeout_ms = timeout_ms
        self._on_queues = on_queues
        self._closed = False
        self.requests_sent = 0  # how many watches went out (an idle consumer's cost)

    def start(self, known: Iterable[int]) -> None:
        self._send(known)

    def close(self) -> None:
        self._closed = True

    def _send(self, known: Iterable[int]) -> None:
        if self._closed:
            return
        try:
            call = self._channel.call("reader0", WatchQueues(self._topic, tuple(sorted(known)), WATCH_WAIT_MS),
                                      timeout_ms=WATCH_WAIT_MS + self._timeout_ms)
        except BrokerError:  # closed meanwhile
            return
        self.requests_sent += 1
        call.add_done_callback(self._done)

    def _done(self, call: Future[dict[str, Any]]) -> None:
        if self._closed:
            return
        try:
            spans = QueueInfoReply.decode(call.result()).queues
        except BrokerTimeoutError:
            spans = None  # asked again at once
        except (BrokerError, ReplyError) as exc:
            if isinstance(exc, BrokerError) and exc.status == CLOSED:
                return
            log.warning("%s: watching its queues failed (%s); trying again", self._topic, exc)
            with contextlib.suppress(BrokerError):  # closed meanwhile
                self._channel.call_later(WATCH_ERROR_BACKOFF_MS, lambda: self._send(self._on_queues({})))
            return
        self._send(self._on_queues(spans or {}))
