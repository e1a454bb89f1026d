"""flush/commit service: owns durability.

It fsyncs the commitlog files (an fsync on any descriptor of a file flushes the pages the writer
dirtied through its own mapping), the consume-queue files and the index files, each on its own
cadence, writes the checkpoint after each, and publishes ``flushed`` (how far the commitlog is
durable). ASYNC_FLUSH follows RocketMQ's FlushRealTimeService: every ``interval_ms``, when at least
``least_pages`` pages wait, or everything once per ``thorough_interval_ms``. A ``written`` notice
flagged ``sync`` is flushed at once: one fsync answers every SYNC_FLUSH waiter up to that offset
(group commit). Between flushes it faults in the commitlog pages just ahead of the writer and, with
``spare_file``, prepares the next commitlog file under a name no reader counts (``mqstore.engine.log.page_warmer``),
so the writer's copies do not pay for fresh pages and its roll is one rename. The directory entry of
a new commitlog file (created inline or renamed from the spare by the writer) is fsynced here, before
any flushed notice covers a byte of that file (the ``commitlog`` directory's own name is made durable
where it is made), and so are those of new consume-queue files, their queue and topic directories,
and new index files, before the checkpoint counts them. Consume-queue and index files are synced as
the builders' notices name them; those notices are numbered (``mqstore.ipc.wire.notices.Chain``), and
the first one this service receives, one after a gap, or one from a restarted builder makes it sync
every file of that family first (a sweep): the checkpoint's consume-queue and index times move only
past entries known durable, whatever notices PUB/SUB lost. A failed fsync is
fatal: the process exits, the supervisor restarts it, and no SYNC_FLUSH send is acknowledged for
data not known durable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import zmq

from mqstore.actors.clock import monotonic_ms
from mqstore.actors.file_syncer import FileSyncer
from mqstore.actors.runtime import Runtime
from mqstore.actors.ticks import Ticks
from mqstore.engine.consumequeue.consume_queue import cq_file_size
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE
from mqstore.engine.consumequeue.store import queue_files
from mqstore.engine.keyindex.file_names import index_file_names
from mqstore.engine.log.mapped_file import OS_PAGE_SIZE, file_name
from mqstore.engine.log.page_warmer import PageWarmer
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.engine.meta.metafile import DirectorySync, fsync_dir
from mqstore.ipc.transport.sockets import bind, connect
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Arrived, Chain, Flushed, Indexed, Written

log = logging.getLogger("mqstore")
Notice = TypeVar("Notice", Written, Arrived, Indexed)
WARM_STEPS_PER_ROUND = 16  # of mqstore.engine.log.page_warmer's 4 MiB: at most ~64 MiB advised per poll round


def _nothing() -> None:
    """``between`` when nothing is to be served between steps (the last flushes before stopping)."""


class FlushActor:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        cfg = runtime.config
        self.store_dir = Path(cfg.store_dir)
        self.file_size = cfg.store.geometry.commitlog_file_size
        self.cq_file_size = cq_file_size(cfg.store.geometry.cq_entries_per_file)
        self.checkpoint = Checkpoint.open(self.store_dir / "checkpoint")
        self.syncer = FileSyncer(runtime.open_files)
        self.written_end = 0
        self.written_store_ms = 0
        self.flushed_end = -1  # unknown until the first flush, which covers every file
        self.sync_wanted = False
        self.queue_flushed: dict[tuple[str, int], int] = {}  # queue -> offset flushed up to
        self.queue_max: dict[tuple[str, int], int] = {}      # queue -> offset the builder reached
        self.cq_store_ms = 0
        self.cq_chain = Chain()
        self.cq_sweep_due = False  # a notice may be missing: every consume-queue file is synced next
        self.queues_moved = False  # a notice named a queue since the last flush of the consume queues
        self.index_files: set[str] = set()
        self.index_store_ms = 0
        self.index_chain = Chain()
        self.index_sweep_due = False
        self.sweeps = 0  # sweeps of the consume queues: one per builder or service start, or notice lost
        self.queues_applied = 0  # how far the consume-queue builder's notices say it applied the commitlog
        self.queues_durable = 0  # the consume queues' entries of every record below it are synced
        self.last_thorough_ms = monotonic_ms()
        self.warmer = PageWarmer(self.store_dir / "commitlog", self.file_size, spare=cfg.flush.spare_file,
                                 open_files=runtime.open_files)
        self.dir_synced_file = -1  # the newest commitlog file whose directory entry is known durable
        self.dirs = DirectorySync(self.store_dir)  # names of the files (and directories) others made
        self.checkpoint_due_ms = 0  # the commitlog's flush writes the checkpoint from then on
        self._commitlog_path = (-1, self.store_dir)  # the last commitlog file flushed: its base and path
        self.flushed_ticks = Ticks()  # ``flushed`` goes out on a move or a sync, else as a safety net

    def run(self) -> None:
        ep = self.rt.endpoints
        flushed_out = bind(self.rt.ctx, zmq.PUB, ep.flushed)
        written_in = connect(self.rt.ctx, zmq.SUB, ep.written, subscribe=(schema.WRITTEN,))
        arrived_in = connect(self.rt.ctx, zmq.SUB, ep.arrived, subscribe=(schema.ARRIVED,), hwm=100_000)
        indexed_in = connect(self.rt.ctx, zmq.SUB, ep.indexed, subscribe=(schema.INDEXED,), hwm=100_000)
        # while work is pending only ``written`` wakes the service: the builders' notices (one a round
        # each) wait on their sockets and are read a poll interval's worth at a time (their sockets
        # never fill), and before their files' flush. Once nothing is pending (``quiet``) the service
        # sleeps until a notice of any of them, or the ``flushed`` safety net's deadline
        poller = zmq.Poller()
        poller.register(written_in, zmq.POLLIN)
        poller.register(self.rt.stop_fd, zmq.POLLIN)  # a stop ends the round at once
        flush = self.rt.config.flush
        poll_ms = flush.interval_ms // 5 or 1
        next_commitlog = next_cq = next_index = next_notices = 0
        quiet = False

        def serve_sync() -> None:
            """Between two slow steps (a derived file's fsync, a warming step): a SYNC_FLUSH send
            that came meanwhile is flushed now, not after the rest of the round."""
            self._drain(written_in, Written.decode, self._on_written)
            if self.sync_wanted:
                self._flush_commitlog(flushed_out, monotonic_ms())
        try:
            while not self.rt.stopping:
                for notices in (arrived_in, indexed_in):
                    if quiet and notices not in poller:
                        poller.register(notices, zmq.POLLIN)
                    elif not quiet and notices in poller:
                        poller.unregister(notices)
                timeout_ms = (max(self.flushed_ticks.next_idle_ms - monotonic_ms(), 0) if quiet
                              else 10 if self.sync_wanted else poll_ms)
                ready = self.rt.poll(poller, timeout_ms)
                if written_in in ready:
                    self._drain(written_in, Written.decode, self._on_written)
                now = monotonic_ms()
                if self.sync_wanted or now >= next_commitlog:
                    self._flush_commitlog(flushed_out, now)
                    next_commitlog = now + flush.interval_ms
                if now >= min(next_notices, next_cq, next_index) or arrived_in in ready or indexed_in in ready:
                    next_notices = now + poll_ms
                    self._drain(arrived_in, Arrived.decode, self._on_arrived)
                    self._drain(indexed_in, Indexed.decode, self._on_indexed)
                if now >= next_cq:
                    self._flush_queues(serve_sync)
                    next_cq = now + flush.cq_interval_ms
                if now >= next_index:
                    self._flush_index(serve_sync)
                    next_index = now + flush.index_interval_ms
                quiet = not self._warm(serve_sync) and self._quiet()
                self.rt.report("running", flushed=self.flushed_end, written=self.written_end,
                               spares_prepared=self.warmer.spares_prepared, sweeps=self.sweeps,
                               queues_durable=self.queues_durable)
            self._drain(written_in, Written.decode, self._on_written)
            self._drain(arrived_in, Arrived.decode, self._on_arrived)
            self._drain(indexed_in, Indexed.decode, self._on_indexed)
            self.last_thorough_ms = 0
            self._flush_commitlog(flushed_out, monotonic_ms())
            self._flush_queues()
            self._flush_index()
        finally:
            self.rt.report("stopped", force=True, flushed=self.flushed_end)
            self.syncer.close()
            self.checkpoint.close()
            self.warmer.close()

    def _warm(self, between: Callable[[], None] = _nothing) -> bool:
        """Fault in the commitlog pages just ahead of the writer, then the spare next file's, a few
        steps per round, never while a group commit waits; whether more waits for the next round."""
        for step in range(WARM_STEPS_PER_ROUND):
            if step:  # before the first, the round has just served what came
                between()
            if self.sync_wanted:
                return True
            if not self.warmer.warm(self.written_end) and not self._prepare_spare():
                return False
        return True

    def _quiet(self) -> bool:
        """Nothing to flush, to sync or to publish until a notice comes: the loop may sleep until one."""
        return (0 <= self.written_end <= self.flushed_end and not self.sync_wanted and not self.queues_moved
                and not self.cq_sweep_due and not self.index_sweep_due and not self.index_files
                and self.flushed_ticks.quiet((self.flushed_end,)))

    def _prepare_spare(self) -> bool:
        error = self.warmer.spare_error
        done = self.warmer.prepare_spare(self.written_end) > 0
        if self.warmer.spare_error is not None and self.warmer.spare_error != error:
            log.warning("%s; the writer allocates the next commitlog file itself", self.warmer.spare_error)
        return done

    @staticmethod
    def _drain(sock: zmq.Socket[Any], decode: Callable[[bytes], Notice], handle: Callable[[Notice], None]) -> None:
        while True:
            try:
                _, frame = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                notice = decode(frame)
            except schema.SchemaError as exc:
                log.warning("ignoring a malformed notice: %s", exc)
                continue
            handle(notice)

    def _on_written(self, notice: Written) -> None:
        if notice.end > self.written_end:
            self.written_end = notice.end
            self.written_store_ms = notice.store_ms or self.written_store_ms
        if notice.sync:
            self.sync_wanted = True

    def _on_arrived(self, notice: Arrived) -> None:
        if not self.cq_chain.follows(notice.epoch, notice.seq):
            self.cq_sweep_due = True
        self.queues_applied = max(self.queues_applied, notice.applied)
        self.queues_moved = self.queues_moved or bool(notice.queues)
        for topic, queue_id, max_offset in notice.queues:
            key = (topic, queue_id)
            if max_offset < self.queue_max.get(key, 0):
                # a queue only grows, unless its topic was deleted and made again: sync the new one whole
                self.queue_flushed.pop(key, None)
                self.queue_max[key] = max_offset
            self.queue_max[key] = max(self.queue_max.get(key, 0), max_offset)
        self.cq_store_ms = max(self.cq_store_ms, notice.store_ms)

    def _on_indexed(self, notice: Indexed) -> None:
        if not self.index_chain.follows(notice.epoch, notice.seq):
            self.index_sweep_due = True
        self.index_files.update(notice.files)
        self.index_store_ms = max(self.index_store_ms, notice.store_ms)

    def _flush_commitlog(self, flushed_out: zmq.Socket[Any], now: int) -> None:
        target, store_ms = self.written_end, self.written_store_ms
        thorough = now >= self.last_thorough_ms + self.rt.config.flush.thorough_interval_ms
        dirty_pages = target // OS_PAGE_SIZE - max(self.flushed_end, 0) // OS_PAGE_SIZE
        flushing = target > self.flushed_end and (self.sync_wanted or thorough or self.flushed_end < 0
                                                  or dirty_pages >= self.rt.config.flush.least_pages)
        if flushing:
            # only the bytes written since the last flush: the pages past them are the writer's,
            # populated ahead (dirty zeros), and a whole-file fsync would write them back too
            since = max(self.flushed_end, 0)
            first = since - since % self.file_size
            for base in range(first, target + 1, self.file_size):
                self.syncer.sync_range(self._commitlog_file(base), self.file_size, max(since - base, 0),
                                       min(target - base, self.file_size))
            last_file = (target - 1) // self.file_size  # the file holding the last byte claimed
            if last_file > self.dir_synced_file:  # its name made durable before its bytes count as flushed
                fsync_dir(self.store_dir / "commitlog")
                self.dir_synced_file = last_file
            self.flushed_end = target
        if thorough:
            self.last_thorough_ms = now
        sync, self.sync_wanted = self.sync_wanted, False
        # the commitlog is durable: say so before the checkpoint's own fsync, which a SYNC_FLUSH send
        # need not wait for (a checkpoint behind the log only makes recovery start earlier); for the
        # same reason that fsync comes at most once a flush interval, not once a group commit
        if self.flushed_ticks.due((self.flushed_end,), sync, now):
            flushed_out.send_multipart(Flushed(max(self.flushed_end, 0)).frames())
        if flushing and store_ms:
            self.checkpoint.physic_msg_ms = store_ms
            if thorough or now >= self.checkpoint_due_ms:
                self.checkpoint.flush()
                self.checkpoint_due_ms = now + self.rt.config.flush.interval_ms

    def _commitlog_file(self, base: int) -> Path:
        """The commitlog file at ``base``, its path made once, not once a group commit."""
        if base != self._commitlog_path[0]:
            self._commitlog_path = (base, self.store_dir / "commitlog" / file_name(base))
        return self._commitlog_path[1]

    def _flush_queues(self, between: Callable[[], None] = _nothing) -> None:
        """fsync every consume-queue file written since the last flush (a queue seen for the first
        time has all its files synced once: cheap for clean files, and nothing is missed), or every
        file there is when a notice may be missing; then the checkpoint's consume-queue time."""
        store_ms, applied = self.cq_store_ms, self.queues_applied
        self.queues_moved = False
        root = self.store_dir / "consumequeue"
        swept = self.cq_sweep_due
        if swept:
            self.cq_sweep_due = False
            self._sweep_queues(root, between)
            self.sweeps += 1
        dirty = [(key, m) for key, m in self.queue_max.items() if m > self.queue_flushed.get(key, 0)
                 or key not in self.queue_flushed]
        if not dirty and not swept:
            self.queues_durable = applied
            return
        for (topic, queue_id), max_offset in dirty:
            first = self.queue_flushed.get((topic, queue_id), 0) * CQ_ENTRY_SIZE // self.cq_file_size
            last = max(max_offset - 1, 0) * CQ_ENTRY_SIZE // self.cq_file_size
            for n in range(first, last + 1):
                self.syncer.fsync(root / topic / str(queue_id) / file_name(n * self.cq_file_size))
                between()
            self.dirs.sync(root / topic / str(queue_id))  # a file or the queue made since: its name
            self.queue_flushed[(topic, queue_id)] = max_offset
        self.queues_durable = applied
        if store_ms:
            self.checkpoint.logics_msg_ms = store_ms
            self.checkpoint.flush()

    def _sweep_queues(self, root: Path, between: Callable[[], None]) -> None:
        """fsync every file of every queue. Each queue then counts as synced up to where the notices
        took it, or, where the files go further, to its newest file's first entry: that file is synced
        again once notices name entries past it."""
        for key, bases in queue_files(root):
            for base in bases:
                self.syncer.fsync(root / key[0] / str(key[1]) / file_name(base))
                between()
            self.dirs.sync(root / key[0] / str(key[1]))  # and the names of its files and directories
            synced = max(self.queue_max.get(key, 0), bases[-1] // CQ_ENTRY_SIZE)
            self.queue_max[key] = self.queue_flushed[key] = synced

    def _flush_index(self, between: Callable[[], None] = _nothing) -> None:
        if self.index_sweep_due:  # a notice may be missing: every index file, named or not
            self.index_sweep_due = False
            self.index_files.update(index_file_names(self.store_dir / "index"))
        if not self.index_files:
            return
        store_ms = self.index_store_ms
        for name in sorted(self.index_files):
            self.syncer.fsync(self.store_dir / "index" / name)
            between()
        self.dirs.sync(self.store_dir / "index")
        self.index_files.clear()
        if store_ms:
            self.checkpoint.index_msg_ms = store_ms
            self.checkpoint.flush()

