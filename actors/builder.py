"""consumequeue-builder and index-builder: each owns its derived files and applies DispatchRequests.

The commitlog is the truth and a DispatchRequest is a fast hint. Each batch says which commitlog
range it covers; a builder that sees a gap (a dropped notice, or a restart) reads the missing range
from the commitlog itself (as columns, a chunk of records at a time, the way recovery re-dispatches),
and a range it already applied is skipped. ``tick`` notices tell how far the writer has published,
so a gap at the end is closed within a tick. The writer never waits for a builder: if one is slow or
dead, it catches up from the files. What comes in (``Dispatch``, ``Tick``) and what goes out
(``Arrived``, ``Indexed``) are the typed notices of ``mqstore.ipc.wire.notices``.

The frames one poll round drains are applied together: consecutive batches are joined into one
(``DispatchBatch.concat``) and applied once, so a builder that fell behind pays the fixed cost of an
apply (grouping by queue, a put into the index file) once per round, not once per frame. A batch is
read where ZeroMQ received it (a round of one batch copies nothing), and a builder that reads no
keys (``reads_keys``: the consume-queue builder) neither checks nor joins their text. A round
of the index builder begins no sooner than ``[broker] index_round_ms`` after the last one while
frames come faster than that (``IndexBuilderActor.rest_ms``), and takes every frame that queued
meanwhile: fewer and larger rounds, one wake-up a window rather than one a frame, and at a low rate
no second wake-up a round for a rest that gathers nothing. The consume-queue builder's rounds wait
for nothing: every consumer waits on its ``Arrived`` notice,
so a window would be on every message's path (under load its rounds grow by themselves, from the
frames that queue while it applies). A gap, a tick or the end of the round applies what is pending
first.

Where a builder resumes is read off its own files: the consume queues' furthest entry, or the start
of a batch it was writing across queues when it stopped (``ConsumeQueueStore.applied_end``), or the
newest index file's end offset.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import zmq

from mqstore.actors.clock import monotonic_ms, wall_ms
from mqstore.actors.runtime import Runtime
from mqstore.engine.batch.column_scan import scan_columns
from mqstore.engine.batch.dispatch import DispatchBatch, Dispatched
from mqstore.engine.batch.dispatch_columns import DispatchColumns
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.reclaim.retention import delete_derived_below
from mqstore.ipc.transport.sockets import bind, connect, has_message, recv_message, send_notice
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Arrived, Dispatch, Indexed, Tick, TopicDeleted

log = logging.getLogger("mqstore")


Received = tuple[bytes, bytes, list[memoryview]]  # a notice's topic, its map, the frames after it (uncopied)


class BuilderActor:
    notice_role = ""
    reads_keys = True  # whether ``apply`` reads the batch's key text: a builder that does not, never checks it

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.store_dir = Path(runtime.config.store_dir)
        self.geometry = runtime.config.store.geometry
        self.commitlog = CommitLog.open(self.store_dir / "commitlog", self.geometry.commitlog_file_size,
                                        writable=False, open_files=runtime.open_files)
        self.applied = 0     # every record before this commitlog offset is applied
        self.store_ms = 0    # store time of the last record applied
        # this process's notices are numbered (``mqstore.ipc.wire.notices.Chain``): the flush service
        # syncs only the files they name, and must learn when one was lost or a predecessor's never sent
        self.epoch = secrets.randbits(62) + 1
        self.seq = -1
        self.last_round_frames = 0  # the notices the last round gathered: more than one, frames queue (load)

    # subclasses: where to resume, how to apply, what to announce
    def resume_from(self) -> int:
        raise NotImplementedError

    def apply(self, batch: Dispatched) -> None:
        raise NotImplementedError

    def notice(self) -> Arrived | Indexed:
        raise NotImplementedError

    def numbered(self) -> tuple[int, int]:
        """The next notice's epoch and seq."""
        self.seq += 1
        return self.epoch, self.seq

    def close(self) -> None:
        self.commitlog.close()

    def run(self) -> None:
        self.applied = max(self.resume_from(), self.commitlog.min_offset)
        log.info("resuming at commitlog offset %d", self.applied)
        self.rt.report("running", force=True, applied=self.applied, retained_from=self.commitlog.min_offset)
        dispatch_in = connect(self.rt.ctx, zmq.SUB, self.rt.endpoints.dispatch, hwm=100_000,
                              subscribe=(schema.DISPATCH, schema.TICK, schema.TOPIC_DELETED))
        notice_out = bind(self.rt.ctx, zmq.PUB, self.rt.endpoints.role(self.notice_role), hwm=100_000)
        next_retention_ms = 0
        poller = zmq.Poller()
        poller.register(dispatch_in, zmq.POLLIN)
        poller.register(self.rt.stop_fd, zmq.POLLIN)  # a stop ends the round at once
        resting = zmq.Poller()  # between rounds that come often (``rest_ms``): frames queue meanwhile
        resting.register(self.rt.stop_fd, zmq.POLLIN)
        try:
            while not self.rt.stopping:
                now = monotonic_ms()
                if now >= next_retention_ms:
                    next_retention_ms = now + self.rt.config.broker.clean_interval_ms
                    self._follow_retention()
                rest_ms = self.rest_ms(now)
                if rest_ms > 0:
                    self.rt.poll(resting, min(rest_ms, max(0, next_retention_ms - now)))
                    continue
                # nothing else is due: the writer's dispatch notices and ticks (a lost one made good by
                # the next) wake the round, retention's cadence the rest
                if dispatch_in not in self.rt.poll(poller, max(0, next_retention_ms - monotonic_ms())):
                    self.rt.report("running", applied=self.applied, retained_from=self.commitlog.min_offset)
                    continue
                changed = self._on_round(self.gather(dispatch_in))
                if changed:
                    send_notice(notice_out, self.notice())
                self.rt.report("running", applied=self.applied, retained_from=self.commitlog.min_offset)
        finally:
            self.rt.report("stopped", force=True, applied=self.applied)
            self.close()

    def round_ms(self) -> int:
        """How long a round waits for more frames after its first."""
        return 0

    def rest_ms(self, now_ms: int) -> int:
        """How long to wait, at ``now_ms``, before the next round takes the frames waiting (0: none)."""
        return 0

    def gather(self, dispatch_in: zmq.Socket[Any]) -> list[Received]:
        """The notices of this round (``_gather_round``, within ``round_ms``); counted for the next's window."""
        self.round_started(monotonic_ms())
        frames = _gather_round(dispatch_in, self.round_ms())
        self.last_round_frames = len(frames)
        return frames

    def round_started(self, now_ms: int) -> None:
        """A round begins at ``now_ms`` (``rest_ms`` counts from it)."""

    def _follow_retention(self) -> None:
        """When the writer deleted old commitlog files, delete the derived files wholly below them."""
        before = self.commitlog.min_offset
        self.commitlog.queue.refresh()
        if self.commitlog.min_offset > before:
            self.delete_below(self.commitlog.min_offset)
            self.applied = max(self.applied, self.commitlog.min_offset)

    def delete_below(self, min_phys_offset: int) -> None:
        raise NotImplementedError

    def delete_topic(self, topic: str) -> None:
        """A topic was deleted (``TopicDeleted``): what this builder keeps per topic goes with it."""

    def _on_round(self, frames: list[Received]) -> bool:
        """Apply the notices of one poll round, in order; whether anything was applied."""
        pending = _Pending(self.applied)
        changed = False
        for topic, frame, parts in frames:
            try:
                if topic == schema.TOPIC_DELETED:
                    deleted = TopicDeleted.decode(frame)
                    changed |= self._apply_pending(pending)
                    changed |= self._catch_up(deleted.end)  # its records before the deletion land first
                    self.delete_topic(deleted.topic)
                    pending = _Pending(self.applied)
                    continue
                if topic == schema.TICK:
                    end, batch = Tick.decode(frame).end, None
                else:
                    dispatch = Dispatch.decode(frame, parts, keys=self.reads_keys)
                    start, end, batch = dispatch.from_phys, dispatch.to_phys, dispatch.batch
            except schema.SchemaError as exc:
                log.warning("ignoring a malformed dispatch notice: %s", exc)
                continue
            if end <= pending.end:
                continue  # already applied or pending (a repeat, or reput got there first)
            if batch is None or start > pending.end:
                changed |= self._apply_pending(pending)
                changed |= self._catch_up(start if batch is not None else end)
                pending = _Pending(self.applied)
                if batch is None or self.applied < start:
                    continue  # a tick, or a gap that could not be closed yet (the next tick retries)
            pending.add(batch.after(pending.end), end)
        return self._apply_pending(pending) or changed

    def _apply_pending(self, pending: _Pending) -> bool:
        if pending.end <= self.applied:
            return False
        if pending.batches:
            batch = DispatchBatch.concat(pending.batches)
            if not self._guarded(self.apply, batch, int(batch.columns["store_ms"][-1])):
                return False
        self.applied = pending.end
        return True

    def _guarded(self, apply: Callable[[Any], None], batch: Any, store_ms: int) -> bool:
        """Apply, or on a full disk leave ``applied`` where it was: the next tick retries from the
        commitlog, and what was applied before the error is skipped as a duplicate."""
        try:
            apply(batch)
        except OSError as exc:
            log.warning("cannot write derived files (%s); retrying from commitlog offset %d", exc, self.applied)
            return False
        self.store_ms = store_ms
        return True

    def _catch_up(self, end: int) -> bool:
        """Reput: apply the records in [applied, end) read from the commitlog itself, a chunk of
        records at a time, as columns, so a long lag never sits in memory at once."""
        if end <= self.applied:
            return False
        self.commitlog.queue.refresh()
        start = self.applied
        scan = scan_columns(self.commitlog, self.applied, end, check_crc=False)
        with closing(iter(scan)) as chunks:  # no view of a mapped file outlives the scan
            for chunk in chunks:
                try:
                    columns = DispatchColumns.of(chunk.buf, chunk.records, self.rt.config.store.delay_levels)
                finally:
                    del chunk
                rows = columns.rows
                if not self._guarded(self.apply, columns, int(rows["store_ms"][-1])):
                    return self.applied > start
                self.applied = int(rows["phys_offset"][-1] + rows["size"][-1])
        if scan.stop is not None:
            phys, decoded = scan.stop
            log.warning("reput stopped at %d: %s", phys, decoded.reason or decoded.kind.value)
        self.applied = max(self.applied, scan.end)  # past a blank, the next file
        return self.applied > start


def _gather_round(dispatch_in: zmq.Socket[Any], round_ms: int) -> list[Received]:
    """The notices of one round: those waiting, and those arriving within ``round_ms`` of the first
    (fewer, larger rounds under load: a round's fixed costs are paid once for all of them). A
    dispatch batch's frames are not copied: its columns are read where ZeroMQ received them."""
    frames: list[Received] = []
    deadline_ms = monotonic_ms() + round_ms if round_ms else 0
    while True:
        # asked, not received until zmq.Again: the exception costs more than a whole one-record apply
        if not has_message(dispatch_in):
            left_ms = deadline_ms - monotonic_ms() if round_ms else 0
            if left_ms <= 0 or not dispatch_in.poll(left_ms):
                return frames
            continue
        head, parts = recv_message(dispatch_in, zmq.NOBLOCK, head=2)
        if len(head) == 2:  # a lone topic frame is no notice
            frames.append((head[0], head[1], parts))


class _Pending:
    """Batches of a round not applied yet: they continue ``applied`` and end at ``end``."""

    def __init__(self, end: int) -> None:
        self.end = end
        self.batches: list[DispatchBatch] = []

    def add(self, batch: DispatchBatch, end: int) -> None:
        if len(batch):
            self.batches.append(batch)
        self.end = end


class ConsumeQueueBuilderActor(BuilderActor):
    notice_role = "arrived"
    reads_keys = False  # the consume queues hold no keys: their key text is neither checked nor joined

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self.queues = ConsumeQueueStore.open(self.store_dir / "consumequeue", self.geometry.cq_entries_per_file,
                                             open_files=runtime.open_files)
        self.changed: dict[tuple[str, int], int] = {}

    def resume_from(self) -> int:
        self.queues.recover()  # a killed predecessor may have left a half-written entry
        self.queues.correct_min_offsets(self.commitlog.min_offset)
        return self.queues.applied_end()

    def apply(self, batch: Dispatched) -> None:
        self.changed.update(self.queues.dispatch_rows(batch.rows, batch.topics,
                                                      expired_below=self.commitlog.min_offset))

    def delete_below(self, min_phys_offset: int) -> None:
        deleted, _ = delete_derived_below(min_phys_offset, self.queues, None)
        log.info("retention: deleted %d consume-queue file(s) below %d", deleted, min_phys_offset)

    def delete_topic(self, topic: str) -> None:
        if self.queues.delete_topic(topic, self.applied):
            log.info("deleted the consume queues of topic %s", topic)

    def notice(self) -> Arrived:
        queues = tuple((topic, queue_id, max_offset) for (topic, queue_id), max_offset in self.changed.items())
        self.changed.clear()
        return Arrived(queues, self.applied, self.store_ms, *self.numbered())

    def close(self) -> None:
        self.queues.close()
        super().close()


class IndexBuilderActor(BuilderActor):
    notice_role = "indexed"

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self.index = IndexService.open(self.store_dir / "index", self.geometry.index_slot_count,
                                       self.geometry.index_entry_count, wall_ms, open_files=runtime.open_files)
        self.files: set[str] = set()
        self.round_starts_ms = (-(1 << 62), -(1 << 62))  # the last two rounds' starts, the newest last

    def round_started(self, now_ms: int) -> None:
        self.round_starts_ms = (self.round_starts_ms[1], now_ms)

    def rest_ms(self, now_ms: int) -> int:
        """While frames come faster than one an ``index_round_ms`` (the last two rounds began within it
        of each other, or the last gathered more than one: they queue), the next round begins
        ``index_round_ms`` after the last began and takes every frame that queued meanwhile, which
        wait unread: one wake-up a window, not one a frame (a window spent polling the socket would
        wake for each, and a steady rate of single frames would never open one). Frames that come
        seldom wait for nothing, and a rest follows only a frame that came within one, so it seldom
        ends with nothing to gather: no second wake-up a round."""
        round_ms = self.rt.config.broker.index_round_ms
        before, last = self.round_starts_ms
        if round_ms <= 0 or (last - before >= round_ms and self.last_round_frames <= 1):
            return 0
        return max(0, last + round_ms - now_ms)

    def resume_from(self) -> int:
        last = self.index.last_file
        return last.end_phys_offset if last is not None and last.index_count > 1 else 0

    def apply(self, batch: Dispatched) -> None:
        self.index.build_hashed(batch.rows, *batch.index_keys())
        self._note_file()

    def _note_file(self) -> None:
        if self.index.last_file is not None:
            self.files.add(self.index.last_file.path.name)

    def delete_below(self, min_phys_offset: int) -> None:
        _, deleted = delete_derived_below(min_phys_offset, None, self.index)
        log.info("retention: deleted %d index file(s) below %d", deleted, min_phys_offset)

    def notice(self) -> Indexed:
        files = tuple(sorted(self.files))
        self.files.clear()
        return Indexed(files, self.applied, self.store_ms, *self.numbered())

    def close(self) -> None:
        self.index.close()
        super().close()
