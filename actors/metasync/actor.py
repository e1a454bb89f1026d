"""The ``metasync`` actor, on a SLAVE: every ``[ha] metadata_sync_interval_ms`` it fetches its
master's topics, consumer offsets, delay offsets, timer checkpoint and ack-mode marks over the
master's remoting front (``mqstore.actors.metasync.fetch``, RocketMQ's SlaveSynchronize, signed with
``[ha] access_key`` / ``secret_key`` when set) and applies them here
(``mqstore.actors.metasync.apply``); the consumer offsets through reader 0, which owns them, and each
ack-mode queue's mark through the reader that owns its index (``merge_ack_marks``).

The master's front is ``[ha] master_remoting``, else ``master_address``'s host and its HA port - 1
(``mqstore.actors.config_ha.master_remoting``). Each item is fetched and applied on its own: one that
fails is logged and reported, the others go on. A master that cannot be reached is logged once per
outage, and once when it answers again. Stats: ``last_sync_ms`` (wall time of the last full round),
per item ``ok`` / the error, the master's topic ``data_version`` counter, the offsets moved and
held back at the queue end, and the ack marks seen (``ack_marks_seen``), the queues they moved, the messages they acked
here and the marks held back at the queue end; ``groups_deleted``: groups deleted on the master whose
offsets went here too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.config_ha import master_remoting
from mqstore.actors.ha_status import METADATA_ITEMS
from mqstore.actors.metasync.apply import apply_delay_offsets, apply_timer_checkpoint, apply_topics
from mqstore.actors.metasync.fetch import MasterAnswerError, MasterMetadata
from mqstore.actors.runtime import Runtime
from mqstore.engine.errors import MqstoreError
from mqstore.ipc.remoting.codec import FrameError
from mqstore.ipc.remoting.signature import Credentials
from mqstore.ipc.transport.channel import BrokerError, BrokerTimeoutError, Channel
from mqstore.ipc.wire import receipts, replies, requests
from mqstore.ipc.wire.requests.metadata import AckMark

log = logging.getLogger("mqstore")

CALL_TIMEOUT_MS = 10_000
ITEMS = METADATA_ITEMS


class LocalWriteError(MqstoreError):
    """A fetched item this broker could not write to its own files (a full disk, say): the master was
    reached, and the round goes on with the other items."""


@contextmanager
def _written_here(item: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise LocalWriteError(f"writing {item} here failed: {exc}") from None


class MetadataSyncActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        cfg = runtime.config
        self.store_dir = Path(cfg.store_dir)
        self.interval_ms = cfg.ha.metadata_sync_interval_ms
        self.host, self.port = master_remoting(cfg.ha)
        self.credentials = Credentials(cfg.ha.access_key, cfg.ha.secret_key) if cfg.ha.access_key else None
        self.readers = cfg.broker.readers
        self.channel = Channel({f"reader{i}": [runtime.endpoints.reader(i)] for i in range(self.readers)},
                               name="mqstore-metasync", curve=runtime.endpoints.curve)
        self.items: dict[str, str] = dict.fromkeys(ITEMS, "never")
        self.last_sync_ms = -1
        self.data_version = -1
        self.offsets_moved = self.offsets_clamped = self.ack_marks_seen = self.rounds = 0
        self.groups_deleted = 0
        self.ack_queues_moved = self.ack_acked = self.ack_clamped = 0
        self.unreachable: str | None = None  # why the master could not be reached, while it cannot

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.rt.stop_fd, zmq.POLLIN)
        next_ms = monotonic_ms()
        try:
            while not self.rt.stopping:
                if monotonic_ms() >= next_ms:
                    self.sync()
                    next_ms = monotonic_ms() + self.interval_ms
                self.rt.report("running", **self.stats())
                self.rt.poll(poller, max(0, next_ms - monotonic_ms()))  # until the next round (a stop wakes it)
        finally:
            self.channel.close()

    def stats(self) -> dict[str, Any]:
        return {"master": f"{self.host}:{self.port}", "last_sync_ms": self.last_sync_ms,
                "data_version": self.data_version, "rounds": self.rounds, "offsets_moved": self.offsets_moved,
                "offsets_clamped": self.offsets_clamped, "ack_marks_seen": self.ack_marks_seen,
                "ack_queues_moved": self.ack_queues_moved, "ack_acked": self.ack_acked,
                "ack_clamped": self.ack_clamped, "groups_deleted": self.groups_deleted,
                **{f"{item}": state for item, state in self.items.items()}}

    def sync(self) -> None:
        """One round: every item fetched and applied, each on its own."""
        try:
            master = MasterMetadata(self.host, self.port, timeout_s=CALL_TIMEOUT_MS / 1000,
                                    credentials=self.credentials)
        except OSError as exc:
            self._lost(f"cannot connect: {exc}")
            return
        try:
            steps: dict[str, Callable[[], None]] = {
                "topics": lambda: self._topics(master), "consumer_offsets": lambda: self._offsets(master),
                "delay_offsets": lambda: self._delay(master), "timer_checkpoint": lambda: self._timer(master),
                "ack_marks": lambda: self._ack_marks(master)}
            for item, step in steps.items():
                try:
                    step()
                except (OSError, FrameError) as exc:  # the connection (local writes: LocalWriteError)
                    self._lost(f"{item}: {exc}")
                    return
                except (MasterAnswerError, BrokerError, BrokerTimeoutError, MqstoreError, ValueError) as exc:
                    if self.items[item] in ("ok", "never"):
                        log.warning("metasync: %s from %s:%d not applied: %s", item, self.host, self.port, exc)
                    self.items[item] = f"error: {exc}"[:200]
                else:
                    self.items[item] = "ok"
        finally:
            master.close()
        if self.unreachable is not None:
            log.info("metasync: the master at %s:%d answers again", self.host, self.port)
            self.unreachable = None
        self.last_sync_ms = wall_ms()
        self.rounds += 1

    def _lost(self, why: str) -> None:
        if self.unreachable is None:
            log.warning("metasync: the master's front at %s:%d cannot be reached (%s); retrying every %d ms",
                        self.host, self.port, why, self.interval_ms)
        self.unreachable = why
        for item in ITEMS:
            self.items[item] = "unreachable"

    def _topics(self, master: MasterMetadata) -> None:
        topics, version = master.topics()
        self.data_version = version.counter
        with _written_here("topics.json"):
            applied = apply_topics(self.store_dir, topics, version)
        if applied:
            log.info("metasync: %d topics at the master's data version %d", len(topics), version.counter)

    def _offsets(self, master: MasterMetadata) -> None:
        entries, deleted = master.consumer_offsets()
        future = self.channel.call("reader0", requests.MergeOffsets(tuple(entries), tuple(deleted)),
                                   timeout_ms=CALL_TIMEOUT_MS)
        merged = replies.MergeOffsetsReply.decode(future.result())
        self.offsets_moved += merged.moved
        self.groups_deleted += merged.groups_deleted
        self.offsets_clamped += len(merged.clamped)
        for topic, group, queue_id, end in merged.clamped[:10]:
            log.info("metasync: %s's offset on %s/%d held at this broker's queue end %d (the log is behind)",
                     group, topic, queue_id, end)

    def _delay(self, master: MasterMetadata) -> None:
        offsets = master.delay_offsets()
        with _written_here("delayOffset.json"):
            apply_delay_offsets(self.store_dir, offsets, wall_ms())

    def _timer(self, master: MasterMetadata) -> None:
        progress = master.timer_checkpoint()
        if progress is not None:
            with _written_here("the timer checkpoint"):
                apply_timer_checkpoint(self.store_dir, progress)

    def _ack_marks(self, master: MasterMetadata) -> None:
        marks = master.ack_marks()
        self.ack_marks_seen = len(marks)
        owned: list[list[AckMark]] = [[] for _ in range(self.readers)]
        for (group, topic, queue_id), acked_below in sorted(marks.items()):
            owned[receipts.ack_owner(group, topic, queue_id, self.readers)].append((group, topic, queue_id,
                                                                                    acked_below))
        for reader, reader_marks in enumerate(owned):
            if not reader_marks:
                continue
            future = self.channel.call(f"reader{reader}", requests.MergeAckMarks(tuple(reader_marks)),
                                       timeout_ms=CALL_TIMEOUT_MS)
            merged = replies.MergeAckMarksReply.decode(future.result())
            self.ack_queues_moved += merged.moved
            self.ack_acked += merged.acked
            self.ack_clamped += len(merged.clamped)
            for group, topic, queue_id, end in merged.clamped[:10]:
                log.info("metasync: %s's ack mark on %s/%d held at this broker's queue end %d (the log is behind)",
                         group, topic, queue_id, end)
