"""The writer's way out: answers to producers on the ingress ROUTER, and its notices (``mqstore.ipc.wire.notices``):
``dispatch`` and ``tick`` to the builders, ``written`` to the flush service.

``Progress`` is what the notices report and outlives a round: how far the dispatch batches published
reach (a ``tick`` tells builders they may apply up to there) and the store time of the last record
appended (a ``written`` notice carries it to the checkpoint), and what the metrics count (messages
and bytes in per topic, as batches are dispatched; send latencies). ``Outlets`` is the three sockets seen
from one round; every publish of a batch moves ``Progress``, so no caller keeps that count itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import zmq

from mqstore.actors.meters import Latencies, TopicCounts
from mqstore.actors.ticks import Ticks
from mqstore.ipc.transport.sockets import send_frames, send_notice, send_routed
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Dispatch, Tick, Written

log = logging.getLogger("mqstore")
# put before the routing id of a request from ``own_ingress``, so its answer goes back there: a client's
# routing id is ZeroMQ's 5 bytes starting with a zero byte, or its own, which may not start with one
OWN_PEER = b"\x00mqstore-own\x00"  # longer than ZeroMQ's 5 bytes: never a client's routing id


@dataclass(slots=True)
class Progress:
    dispatched_end: int  # every dispatch batch below this commitlog offset was published
    last_store_ms: int = 0  # store time of the last record appended
    topics_in: TopicCounts = field(default_factory=TopicCounts)  # what was dispatched, per topic
    send_latency: Latencies = field(default_factory=Latencies)  # sends, from the round taking them to their answers
    ticks: Ticks = field(default_factory=Ticks)  # when the tick publishes

    def carried(self, written_end: int) -> tuple[int, int, int]:
        """What a tick carries."""
        return written_end, self.dispatched_end, self.last_store_ms


class Outlets:
    """The writer's three sockets as a round uses them."""

    __slots__ = ("dispatch_out", "ingress", "own_ingress", "progress", "written_out")

    def __init__(self, ingress: zmq.Socket[Any], dispatch_out: zmq.Socket[Any], written_out: zmq.Socket[Any],
                 progress: Progress, own_ingress: zmq.Socket[Any] | None = None) -> None:
        self.ingress = ingress
        self.own_ingress = own_ingress
        self.dispatch_out = dispatch_out
        self.written_out = written_out
        self.progress = progress

    def reply(self, identity: bytes, message: dict[str, Any]) -> None:
        """Answer a producer; replies are not bounded, but one that does not read them loses them. An
        identity marked ``OWN_PEER`` is a broker actor's on ``own_ingress``."""
        sock = self.ingress
        if identity.startswith(OWN_PEER) and self.own_ingress is not None:
            sock, identity = self.own_ingress, identity[len(OWN_PEER):]
        try:
            send_routed(sock, identity, schema.pack(message))
        except zmq.Again:
            log.warning("a producer does not read its replies; reply dropped")

    def dispatch(self, notice: Dispatch, frames: list[bytes | memoryview] | None = None) -> None:
        """Publish ``notice`` (``frames``: its frames, when made already)."""
        # the batch's buffers as they are, never written again: one from ZERO_COPY_MIN_BYTES up (64 KiB:
        # the columns of ~1,400 records) goes without a copy, the smaller ones are copied
        send_frames(self.dispatch_out, notice.frames() if frames is None else frames)
        self.progress.dispatched_end = max(self.progress.dispatched_end, notice.to_phys)
        self.progress.topics_in.add_batch(notice.batch)

    def written(self, notice: Written) -> None:
        send_notice(self.written_out, notice)

    def tick(self, written_end: int, sync: bool, now_ms: int, *, force: bool = False) -> bool:
        """How far the log goes, and how far builders may apply, when ``Ticks`` says it is due (or
        ``force``: the last one, at a stop): a dropped notice only delays. Whether it published."""
        progress = self.progress
        if not progress.ticks.due(progress.carried(written_end), sync, now_ms) and not force:
            return False
        self.written(Written(written_end, progress.last_store_ms, sync))
        send_notice(self.dispatch_out, Tick(progress.dispatched_end))
        return True
