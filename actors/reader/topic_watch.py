"""Topic watches: ``watch_queues`` requests parked until their topic has a queue the client does not know.

A consumer that follows every queue of a topic (and one started before its topic exists) keeps one
watch in flight on reader 0, naming the queues it reads; the reader answers it, with ``queue_info``'s
reply, as soon as the topic has another queue, or with what it has when ``wait_ms`` runs out. So
the consumer learns of a new queue when it appears, not by asking again and again.

What tells: an ``arrived`` notice naming a queue of a watched topic that some watch does not know
(its first message: a topic made by its first send, a delayed copy landing on a new queue), and
``topics.json``, which the writer replaces when a topic is made or given more queues (``mqstore
topics create``, ``topics update --queues``) before any message lands there. The file is looked
at every ``RECHECK_WATCH_MS`` while a watch waits (one stat, and a directory listing per watched
topic), which also makes up for a lost notice. A notice for queues every watch of the topic knows
(the steady traffic of a followed topic) costs a set lookup: the topic's queues known to all its
watches are kept beside them, and only a queue outside that set has the topic's queues listed
again (``queue_info``). Watches are bounded (``MAX_WATCHES``): beyond it one is answered at once.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mqstore.actors.reader.state import PublishedStore, QueueKey
from mqstore.ipc.wire import replies, requests
from mqstore.ipc.wire.requests import WatchQueues

MAX_WATCHES = 65_536
RECHECK_WATCH_MS = 1_000


@dataclass(frozen=True, slots=True, eq=False)
class ParkedWatch:
    identity: bytes
    request_id: Any
    topic: str
    known: frozenset[int]
    deadline_ms: int


class TopicWatches:
    def __init__(self, store: PublishedStore, now_ms: Callable[[], int], long_poll_max_ms: int) -> None:
        self._store = store
        self.send: Callable[[bytes, dict[str, Any]], None] = _unsent  # the reader's, once its socket is bound
        self._now_ms = now_ms
        self._long_poll_max_ms = long_poll_max_ms
        self._by_topic: dict[str, list[ParkedWatch]] = {}
        self._known_by_all: dict[str, frozenset[int]] = {}  # per watched topic: the queues all its watches know
        self._deadlines: list[tuple[int, int, ParkedWatch]] = []  # answered ones are skipped when they come up
        self._seq = itertools.count()
        self._count = 0
        self._next_recheck_ms = 0

    def __bool__(self) -> bool:
        return self._count > 0

    def op_watch_queues(self, identity: bytes, request_id: Any, request: WatchQueues) -> dict[str, Any] | None:
        requests.at_most("wait_ms", request.wait_ms, self._long_poll_max_ms)
        info = self._store.queue_info(request.topic)
        if request.wait_ms == 0 or set(info) - set(request.known) or self._count >= MAX_WATCHES:
            return replies.QueueInfoReply(info).encode(request_id)
        now = self._now_ms()
        watch = ParkedWatch(identity, request_id, request.topic, frozenset(request.known), now + request.wait_ms)
        if not self:
            self._next_recheck_ms = now + RECHECK_WATCH_MS
        waiting = self._by_topic.setdefault(watch.topic, [])
        waiting.append(watch)
        self._known_by_all[watch.topic] = (watch.known if len(waiting) == 1
                                           else self._known_by_all[watch.topic] & watch.known)
        heapq.heappush(self._deadlines, (watch.deadline_ms, next(self._seq), watch))
        self._count += 1
        return None

    def ms_to_next(self, now_ms: int, cap_ms: int) -> int:
        """How long the reader may sleep: ``cap_ms``, or less when a watch is due or a recheck is."""
        if not self:
            return cap_ms
        return max(0, min(cap_ms, self._deadlines[0][0] - now_ms, self._next_recheck_ms - now_ms))

    def on_grew(self, keys: Iterable[QueueKey]) -> None:
        """An ``arrived`` notice's queues that grew: answer the watches of their topics that miss one.
        A queue every watch of its topic knows needs no answer, nor a look at the topic's queues."""
        known_by_all = self._known_by_all
        for topic in {t for t, q in keys if t in known_by_all and q not in known_by_all[t]}:
            self._answer_new(topic)

    def tick(self, now_ms: int) -> None:
        """Answer the watches whose time ran out, and, every RECHECK_WATCH_MS, those whose topic has a
        queue more on the files."""
        while self._deadlines and (self._deadlines[0][0] <= now_ms or self._deadlines[0][2] not in
                                   self._by_topic.get(self._deadlines[0][2].topic, ())):
            _, _, watch = heapq.heappop(self._deadlines)
            if self._take(watch):
                self.send(watch.identity, replies.QueueInfoReply(self._store.queue_info(watch.topic)
                                                                  ).encode(watch.request_id))
        if self and now_ms >= self._next_recheck_ms:
            self._next_recheck_ms = now_ms + RECHECK_WATCH_MS
            for topic in list(self._by_topic):
                self._answer_new(topic)

    def drain(self) -> None:
        """The reader is stopping: every watch answered with what it has."""
        for topic in list(self._by_topic):
            info = self._store.queue_info(topic)
            for watch in self._by_topic.pop(topic):
                self.send(watch.identity, replies.QueueInfoReply(info).encode(watch.request_id))
        self._known_by_all.clear()
        self._deadlines.clear()
        self._count = 0

    def _answer_new(self, topic: str) -> None:
        info = self._store.queue_info(topic)
        for watch in list(self._by_topic.get(topic, ())):
            if set(info) - watch.known and self._take(watch):
                self.send(watch.identity, replies.QueueInfoReply(info).encode(watch.request_id))

    def _take(self, watch: ParkedWatch) -> bool:
        waiting = self._by_topic.get(watch.topic)
        if waiting is None or watch not in waiting:
            return False
        waiting.remove(watch)
        if waiting:
            self._known_by_all[watch.topic] = frozenset.intersection(*(w.known for w in waiting))
        else:
            del self._by_topic[watch.topic], self._known_by_all[watch.topic]
        self._count -= 1
        return True


def _unsent(identity: bytes, reply: dict[str, Any]) -> None:
    raise RuntimeError("a topic watch answered before the reader's socket was bound")
