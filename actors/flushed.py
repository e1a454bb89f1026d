"""Progress that waits for the commitlog's flush: what an actor that puts copies through the writer
(the scheduler, the timer) may make durable, and when.

A PUT_OK under ASYNC_FLUSH says the copy is in the page cache, not on the disk; a FLUSH_DISK_TIMEOUT
says it is in the log and not yet flushed. Progress that counts such a copy as delivered must not
reach the disk before the copy does, or a power cut inside the flush interval keeps the progress
and loses the copy (a delayed message lost for good). So an actor keeps its progress in memory and
offers each new state here with the commitlog end it depends on (``offer``); a state is handed back
for writing (``take``) only once the flush service's ``flushed`` notices say the commitlog is
durable up to that end. Until then the delivery goes on: the states wait in order, and the newest
one the flush covers is the one written (the older are covered by it).

At a stop the flush service, stopped after these actors, has not flushed the last copies yet: the
actor syncs the commitlog up to them itself (``sync_commitlog``, what the flush service would do,
once a stop), so the files it leaves count every copy, as RocketMQ's do after a clean stop.

The flushed end is followed over PUB/SUB (``FlushedFollower``): a dropped notice only delays, the
flush service publishes one every flush round. A record ends at a boundary the writer published, and
the flush service flushes to such boundaries, so a flushed end past a record's first byte is past
its last.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from pathlib import Path
from typing import Any, Generic, TypeVar

import zmq

from mqstore.engine.log.mapped_file import file_name
from mqstore.engine.meta.metafile import fsync_dir
from mqstore.ipc.transport.sockets import connect
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Flushed

log = logging.getLogger("mqstore")

State = TypeVar("State")
MAX_WAITING = 256  # states waiting at most; an offer past it merges into the last (the flush is that far behind)


class DurableGate(Generic[State]):
    """States of progress, each waiting until the commitlog is durable up to the end it depends on."""

    def __init__(self) -> None:
        self.flushed_end = 0
        self._waiting: deque[tuple[int, State]] = deque()

    def __len__(self) -> int:
        return len(self._waiting)

    def offer(self, needed_end: int, state: State) -> None:
        """``state`` counts copies that end at or before commitlog offset ``needed_end`` (0: none).
        Ends only grow: a state that needs no more than the last one waiting replaces it."""
        if self._waiting and (needed_end <= self._waiting[-1][0] or len(self._waiting) >= MAX_WAITING):
            needed_end = max(needed_end, self._waiting[-1][0])
            self._waiting.pop()
        self._waiting.append((needed_end, state))

    def on_flushed(self, end: int) -> None:
        self.flushed_end = max(self.flushed_end, end)

    def take(self) -> State | None:
        """The newest state the flushed end covers (the older ones dropped), or None."""
        taken = None
        while self._waiting and self._waiting[0][0] <= self.flushed_end:
            taken = self._waiting.popleft()[1]
        return taken


class FlushedFollower:
    """A subscription to the flush service's ``flushed`` notices."""

    def __init__(self, ctx: zmq.Context[Any], endpoint: str) -> None:
        self.socket = connect(ctx, zmq.SUB, endpoint, subscribe=(schema.FLUSHED,))

    def drain(self) -> int:
        """The furthest end among the notices waiting (0 when none)."""
        end = 0
        while True:
            try:
                _, frame = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return end
            except ValueError:
                continue
            try:
                end = max(end, Flushed.decode(frame).end)
            except schema.SchemaError:
                log.warning("ignoring a malformed flushed notice")

    def close(self) -> None:
        self.socket.close(linger=0)


def sync_commitlog(commitlog_dir: Path, file_size: int, from_phys: int, to_phys: int) -> int:
    """fsync the commitlog files holding [from_phys, to_phys) and their directory; returns
    ``to_phys``, now durable. A failed fsync raises (never durability claimed for bytes not synced)."""
    if to_phys <= from_phys:
        return to_phys
    for base in range(from_phys - from_phys % file_size, to_phys, file_size):
        try:
            fd = os.open(commitlog_dir / file_name(base), os.O_RDONLY)
        except FileNotFoundError:
            continue  # gone with retention: nothing of it to count on
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(commitlog_dir)
    return to_phys
