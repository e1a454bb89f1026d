"""What the metrics actor knows of the broker: one ``Snapshot`` per collection, gathered over the
ops the other actors already serve, never by touching their loops.

- the supervisor's ``status`` (its control socket): every actor's pid, state, restarts, CPU seconds,
  RSS and last stats event (written, flushed and dispatched offsets, each builder's applied one,
  the writer's messages and bytes in per topic and send latencies, each reader's out (per topic, and
  per group and topic: ``delivered``) and pull latencies: ``mqstore.actors.meters``);
- the writer's ``topics``; reader 0's ``queue_info`` per topic, ``groups`` and ``group_describe``
  per group (consumer lag computed once, by ``mqstore.engine.read.group_lag``); every reader's ``ack_stats``;
- the disk the commitlog is on, against the retention watermarks (``mqstore.engine.reclaim.retention``);
- replication, drawn from the ``ha`` and ``metasync`` actors' stats in the status
  (``mqstore.actors.ha_status``): role, epoch, the master or each slave with its lag.

The status and the topics are asked every collection; the queues, groups and ack queues, whose cost
grows with the topics and groups, only when the status or the topics say something moved since they
were last asked (``activity``: bytes written, a topic made, messages in or out, offsets committed,
ack queues, retention moving the builders' first offset), the ack queues also every
``ACK_REFRESH_MS`` (a visibility timeout passing moves them, and no stat shows it; one request a
reader), and everything every ``FULL_REFRESH_MS``, a safety net for what no stat shows (a
thousand requests at a thousand topics: asked every minute, that was most of an idle broker's
CPU). A move asks only the topics whose counts of messages in or out moved since the last
collection and new topics, and describes only the groups on them, or every group when offsets were
committed. A topic that moved is asked again at each move until reader 0 shows the log as far as it
went at the move (its queues' ends follow as the builders and the reader catch up, which moves the
status again), ``PENDING_MS`` at most: a thousand topics made at once are asked two or three times
each, not at every collection for a minute. Every topic and group is asked after retention moved,
an actor restarted, a source failed, or a move no topic's counts explain (a slave's log, appended
without the writer), until reader 0 has caught up with it. An idle broker's collection costs the
same whatever its topics and groups. A source that does not answer
within ``SOURCE_TIMEOUT_MS`` keeps its last answer, and the snapshot says which failed (``errors``).
The snapshot is plain values: the JSON endpoint serves it as it is,
and ``mqstore.actors.metrics.exposition`` turns it into Prometheus text.
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.config import BrokerConfig
from mqstore.actors.ha_status import replication_summary
from mqstore.actors.meters import LATENCY_BOUNDS_S
from mqstore.engine.reclaim.retention import disk_used_ratio
from mqstore.ipc.client.api import Admin
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError
from mqstore.ipc.transport.sockets import connect
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.group_lag import lag_to_wire
from mqstore.ipc.wire.requests import Status

log = logging.getLogger("mqstore")

SOURCE_TIMEOUT_MS = 1_000
MAX_TOPICS = 1_000   # topics whose queues are asked for each collection (the rest: counts only)
MAX_GROUPS = 1_000   # groups described each collection
FULL_REFRESH_MS = 600_000  # the queues, groups and ack queues asked this often even when nothing moved
ACK_REFRESH_MS = 60_000  # the ack queues alone, this often
PENDING_MS = 60_000  # a topic whose move reader 0 has not shown yet is asked again at each move this long at most
BUILDERS = ("cqbuilder", "indexbuilder")

Snapshot = dict[str, Any]


def _sum_counts(into: dict[str, list[int]], counts: Any) -> None:
    if not isinstance(counts, dict):
        return
    for topic, (messages, size_bytes) in counts.items():
        total = into.setdefault(str(topic), [0, 0])
        total[0] += int(messages)
        total[1] += int(size_bytes)


def _sum_groups(into: dict[str, dict[str, int]], counts: Any) -> None:
    """A reader's ``groups_out`` (group -> topic -> messages) added into ``into``."""
    for group, by_topic in (counts if isinstance(counts, dict) else {}).items():
        total = into.setdefault(str(group), {})
        for topic, messages in by_topic.items():
            total[str(topic)] = total.get(str(topic), 0) + int(messages)


def _sum_latencies(into: dict[str, Any], stats: Any) -> None:
    if not isinstance(stats, dict) or len(stats.get("buckets", ())) != len(into["buckets"]):
        return
    into["buckets"] = [a + int(b) for a, b in zip(into["buckets"], stats["buckets"], strict=True)]
    into["sum_s"] += float(stats["sum_s"])


def _no_latencies() -> dict[str, Any]:
    return {"buckets": [0] * (len(LATENCY_BOUNDS_S) + 1), "sum_s": 0.0}


def activity(status: dict[str, Any], topics: Any) -> tuple[Any, ...]:
    """What moves when the queues', groups' or ack queues' answers can have changed: the written and
    flushed ends, the topics, the builders' applied ends, and the writer's and readers' counts of
    messages in and out, readable ends, offsets committed and ack queues. Equal twice: nothing
    happened in between that those answers show."""
    moved = []
    for name, info in sorted(status.get("actors", {}).items()):
        if name == "writer" or name.startswith("reader") or name in BUILDERS:
            moved.append((name, info.get("pid"), info.get("topics_in"), info.get("topics_out"), info.get("commits"),
                          info.get("ack_queues"), info.get("readable_end"), info.get("applied"),
                          info.get("retained_from")))
    return status.get("written"), status.get("flushed"), topics, tuple(moved)


def everything_moved(status: dict[str, Any]) -> tuple[Any, ...]:
    """What moves every topic's queues at once: retention (the builders' first offset) and an actor's
    restart (its pid)."""
    return tuple((name, info.get("pid"), info.get("retained_from")) for name, info in
                 sorted(status.get("actors", {}).items()) if name == "writer" or name.startswith("reader")
                 or name in BUILDERS)


def topic_counts(status: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Per topic: the writer's count of messages in and each reader's out."""
    counts: dict[str, list[Any]] = {}
    for name, info in sorted(status.get("actors", {}).items()):
        for key in ("topics_in", "topics_out"):
            if (name == "writer") == (key == "topics_in") and isinstance(info.get(key), dict):
                for topic, count in info[key].items():
                    counts.setdefault(str(topic), []).append((name, count[0] if count else None))
    return {topic: tuple(c) for topic, c in counts.items()}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) else 0


def _applied(status: dict[str, Any]) -> int:
    return _int(status.get("actors", {}).get("cqbuilder", {}).get("applied"))


def _readable(status: dict[str, Any]) -> int:
    """How far reader 0 (which answers ``queue_info``) has seen the log applied."""
    return _int(status.get("actors", {}).get("reader-0", {}).get("readable_end"))


def _written_in(counts: tuple[Any, ...] | None) -> Any:
    """A topic's count of messages in (the writer's), from its ``topic_counts``."""
    return next((count for name, count in counts or () if name == "writer"), None)


class Collector:
    def __init__(self, config: BrokerConfig, ctx: zmq.Context[Any]) -> None:
        self.config = config
        self.ctx = ctx
        self.control = config.endpoints.control
        self.admin = Admin(endpoints=config.endpoints, timeout_ms=SOURCE_TIMEOUT_MS)
        samples = max(1, config.metrics.history_s * 1000 // config.metrics.collect_interval_ms)
        self.history: deque[list[int]] = deque(maxlen=samples)  # [time ms, messages in, out, written]
        self.last: Snapshot = {"status": {}, "topics": {}, "queues": {}, "groups": {}, "ack": []}
        self._request_id = 0
        self.errors_total = 0
        self._seen: tuple[Any, ...] | None = None  # ``activity`` when the queues and groups were last asked
        self._full_at_ms = self._ack_at_ms = 0
        self._everything: tuple[Any, ...] | None = None  # ``everything_moved`` at the last full ask
        self._counts: dict[str, tuple[Any, ...]] = {}  # ``topic_counts`` at the last collection
        self._pending: dict[str, tuple[int, int]] = {}  # topic -> (the log's end at its move, when): ``_note_moves``
        self._all_pending: tuple[int, int] | None = None  # likewise every topic, after a move no count explains
        self._due: set[str] = set()  # the pending topics reader 0 has caught up with: asked, then done
        self._due_all = False
        self._explained = 0  # the log's end as far as the writer's counts per topic explain it
        self._commits: tuple[Any, ...] | None = None  # the readers' commit counts at the last groups ask
        self.moved = True  # whether the last collection saw anything move
        self.asked = {"queue_info": 0, "group_describe": 0}  # the requests per topic and per group made

    def close(self) -> None:
        self.admin.close()

    def _supervisor_status(self) -> dict[str, Any]:
        """One ``status`` request on a socket of its own: a REQ that got no answer cannot ask again."""
        self._request_id += 1
        sock = connect(self.ctx, zmq.REQ, self.control, rcvtimeo_ms=SOURCE_TIMEOUT_MS)
        try:
            sock.send(schema.pack(Status().encode(self._request_id)))
            reply = schema.unpack(sock.recv())
        except zmq.Again:
            raise BrokerTimeoutError("the supervisor did not answer status") from None
        finally:
            sock.close(linger=0)
        if not reply.get("ok"):
            raise BrokerError(str(reply.get("code")), str(reply.get("message")))
        return reply

    def collect(self) -> Snapshot:
        errors = self._ask((("status", self._supervisor_status), ("topics", self.admin.topics)))
        seen, now_ms = activity(self.last["status"], self.last["topics"]), monotonic_ms()
        self.moved = seen != self._seen
        everything = everything_moved(self.last["status"])
        asked = self._note_moves(now_ms)
        if self.moved or now_ms >= self._full_at_ms or errors or everything != self._everything:
            full = bool(errors) or now_ms >= self._full_at_ms or everything != self._everything or asked is None
            topics = None if full or asked is None else asked | (set(self.last["topics"]) - set(self.last["queues"]))
            more = self._ask((("queues", lambda: self._queues(topics)), ("groups", lambda: self._groups(topics)),
                              ("ack", self._ack)))
            self._seen = None if errors or more else seen
            if not (errors or more):
                self._settle()
            if full and not (errors or more):
                self._full_at_ms, self._everything = now_ms + FULL_REFRESH_MS, everything
            self._ack_at_ms = now_ms + ACK_REFRESH_MS
            errors += more
        elif now_ms >= self._ack_at_ms:
            self._ack_at_ms = now_ms + ACK_REFRESH_MS
            errors += self._ask((("ack", self._ack),))
        self.errors_total += len(errors)
        status = self.last["status"]
        actors: dict[str, Any] = status.get("actors", {})
        topics_in: dict[str, list[int]] = {}
        topics_out: dict[str, list[int]] = {}
        delivered: dict[str, dict[str, int]] = {}  # group -> topic -> messages, every reader's
        send, pull = _no_latencies(), _no_latencies()
        for name, info in actors.items():
            if name == "writer":
                _sum_counts(topics_in, info.get("topics_in"))
                _sum_latencies(send, info.get("send_latency"))
            elif name.startswith("reader"):
                _sum_counts(topics_out, info.get("topics_out"))
                _sum_groups(delivered, info.get("groups_out"))
                _sum_latencies(pull, info.get("pull_latency"))
        writer = actors.get("writer", {})
        written = int(status.get("written", 0))
        offsets: dict[str, Any] = {"written": written, "flushed": int(status.get("flushed", 0)),
                   "dispatched": int(writer.get("dispatched", 0)),
                   "applied": {b: int(actors[b]["applied"]) for b in BUILDERS if "applied" in actors.get(b, {})}}
        now = wall_ms()
        self.history.append([now, sum(c[0] for c in topics_in.values()), sum(c[0] for c in topics_out.values()),
                             written])
        return {"time_ms": now, "store": self.config.store_dir, "status": status, "errors": errors,
                "errors_total": self.errors_total,
                "topics": self._topics(topics_in, topics_out), "groups": self.last["groups"],
                "ack": self.last["ack"], "delivered": delivered, "offsets": offsets, "disk": self._disk(),
                "files": writer.get("files", []),
                "latency": {"bounds_s": list(LATENCY_BOUNDS_S), "send": send, "pull": pull},
                "history": list(self.history), "urls": self._urls(),
                "replication": replication_summary(status, now)}

    def _ask(self, sources: tuple[tuple[str, Any], ...]) -> list[str]:
        """Each source's answer into ``last``; the errors of those that did not answer."""
        errors = []
        for name, source in sources:
            try:
                self.last[name] = source()
            except (BrokerError, BrokerTimeoutError) as exc:
                errors.append(f"{name}: {exc}")
        return errors

    def _note_moves(self, now_ms: int) -> set[str] | None:
        """The topics to ask at a move (None: every topic). A topic whose counts moved since the last
        collection is asked at once, and again once reader 0 shows the log as far as it went then
        (its queues' ends follow as the builders and the reader catch up, which moves the status
        again), ``PENDING_MS`` at most; every topic likewise when the log went further than the
        writer's counts explain (a slave's log, appended without the writer)."""
        status = self.last["status"]
        counts = topic_counts(status)
        before, self._counts = self._counts, counts
        moved = {t for t in set(counts) | set(before) if counts.get(t) != before.get(t)}
        written, readable = _int(status.get("written")), _readable(status)
        everything = False
        if any(_written_in(counts.get(t)) != _written_in(before.get(t)) for t in moved):
            self._explained = max(self._explained, written)
        elif written > self._explained:
            self._explained = written
            self._all_pending, everything = (written, now_ms), True
        for topic in moved:
            self._pending[topic] = (max(written, self._pending.get(topic, (0, 0))[0]), now_ms)
        self._due = {t for t, (end, ms) in self._pending.items() if end <= readable or now_ms - ms >= PENDING_MS}
        self._due_all = self._all_pending is not None and (self._all_pending[0] <= readable
                                                           or now_ms - self._all_pending[1] >= PENDING_MS)
        return None if everything or self._due_all else moved | self._due

    def _settle(self) -> None:
        """After an answer: the moves reader 0 had caught up with when it was asked are done."""
        for topic in self._due:
            del self._pending[topic]
        if self._due_all:
            self._all_pending = None
        self._due, self._due_all = set(), False

    def _queues(self, only: set[str] | None) -> dict[str, dict[str, list[int]]]:
        """Every topic's queues (the first ``MAX_TOPICS``), those of ``only`` asked again, the others kept."""
        names = sorted(self.last["topics"])[:MAX_TOPICS]
        kept = self.last["queues"]
        asked = {t for t in names if only is None or t in only or t not in kept}
        self.asked["queue_info"] += len(asked)
        return {t: {str(q): list(span) for q, span in sorted(self.admin.queue_info(t).items())}
                if t in asked else kept[t] for t in names}

    def _groups(self, only: set[str] | None) -> dict[str, list[dict[str, Any]]]:
        """Every group's queues (the first ``MAX_GROUPS``): those on the topics ``only`` described again,
        or all of them when offsets were committed since the last time."""
        topics_of = self.admin.groups()
        names = sorted(topics_of)[:MAX_GROUPS]
        commits = tuple(info.get("commits") for name, info in sorted(self.last["status"].get("actors", {}).items())
                        if name.startswith("reader"))
        every, self._commits, on = only is None or commits != self._commits, commits, only or set()
        kept = self.last["groups"]
        asked = {g for g in names if every or g not in kept or not on.isdisjoint(topics_of[g])}
        self.asked["group_describe"] += len(asked)
        return {group: [lag_to_wire(q) for q in self.admin.group_describe(group)] if group in asked else kept[group]
                for group in names}

    def _ack(self) -> list[dict[str, Any]]:
        return [q.wire() for q in sorted(self.admin.ack_stats(), key=lambda q: (q.group, q.topic, q.queue_id))]

    def _topics(self, topics_in: dict[str, list[int]], topics_out: dict[str, list[int]]) -> dict[str, Any]:
        topics: dict[str, Any] = {}
        for name in sorted(set(self.last["topics"]) | set(topics_in) | set(topics_out)):
            into, out = topics_in.get(name, [0, 0]), topics_out.get(name, [0, 0])
            topics[name] = {"queue_count": int(self.last["topics"].get(name, 0)),
                            "queues": self.last["queues"].get(name, {}), "messages_in": into[0],
                            "bytes_in": into[1], "messages_out": out[0], "bytes_out": out[1]}
        return topics

    def _disk(self) -> dict[str, float]:
        policy = self.config.retention
        try:
            used = disk_used_ratio(Path(self.config.store_dir) / "commitlog")
        except OSError:
            used = -1.0
        return {"used_ratio": used, "max_used_ratio": policy.disk_max_used_space_ratio,
                "clean_forcibly_ratio": policy.disk_clean_forcibly_ratio, "warning_ratio": policy.disk_warning_ratio}

    def _urls(self) -> dict[str, str]:
        base = self.config.metrics.url
        return {"dashboard": base, "metrics": base + "metrics", "api": base + "api/status"}
