"""MessageStore: the engine's parts composed in one process, with synchronous dispatch.

An embedded store for libraries, tools and tests. The actor system drives the same parts (commitlog,
consume queues, index, checkpoint) from separate processes; nothing here holds a reference back to
its owner.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from mqstore.engine.batch.dispatch import DispatchBatch, DispatchRequest
from mqstore.engine.config import StoreConfig, resolve_geometry
from mqstore.engine.consumequeue.consume_queue import ConsumeQueue
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.delay.table import read_delay_levels, save_delay_levels
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.message import Message, PutResult, PutStatus
from mqstore.engine.log.msgid import UniqKeyGenerator
from mqstore.engine.log.record import Record
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.engine.meta.metafile import abort_exists, create_abort, make_dirs, remove_abort
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, ConsumerOffsets
from mqstore.engine.meta.store_lock import lock_store
from mqstore.engine.put.writer import CommitLogWriter
from mqstore.engine.read.lookup import GetResult, PullLimits, TagFilter, get_messages, query_by_key, view_by_id
from mqstore.engine.reclaim.retention import (
    CleanupDecision,
    RetentionPolicy,
    decide,
    delete_derived_below,
    delete_expired_commitlog,
    disk_used_ratio,
)
from mqstore.engine.repair.crash_files import CrashRepair, repair_crash_files
from mqstore.engine.repair.recovery import RecoveryResult, recover, redispatch

_FEW_RECORDS = 4  # a write of fewer goes to the index record by record, cheaper than as a batch


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class MessageStore:
    def __init__(self, path: Path, config: StoreConfig, now_ms: Callable[[], int], lock_fd: int,
                 commitlog: CommitLog, queues: ConsumeQueueStore, index: IndexService | None,
                 checkpoint: Checkpoint, offsets: ConsumerOffsets, recovery: RecoveryResult) -> None:
        self.path = path
        self.config = config
        self.now_ms = now_ms
        self._lock_fd = lock_fd
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.checkpoint = checkpoint
        self.offsets = offsets
        self.recovery = recovery
        self.writer = CommitLogWriter(commitlog, config,
                                      {(cq.topic, cq.queue_id): cq.max_queue_offset for cq in queues},
                                      UniqKeyGenerator.for_this_process(now_ms, config.store_host.packed[:-4]))
        self._last_store_ms = 0
        self._dispatch_behind_from: int | None = None  # set when a derived file could not be written

    @classmethod
    def open(cls, path: Path | str, config: StoreConfig | None = None, *,
             now_ms: Callable[[], int] = wall_clock_ms, last_stop_clean: bool | None = None) -> MessageStore:
        """Create or recover the store at ``path``; its geometry is read from disk when it exists.

        ``last_stop_clean``: None reads it off the abort marker. True is for a caller that knows every
        process that wrote the store stopped without the machine going down (the supervisor's
        catch-up after its actors stopped): recovery is normal, and the marker it left stays in place
        until ``close`` removes it, so a crash during this open still reads as abnormal next time."""
        path = Path(path)
        make_dirs(path)
        lock_fd = lock_store(path)
        with ExitStack() as opened:  # a part that fails to open (a damaged file) closes the ones before it
            opened.callback(os.close, lock_fd)
            wanted = config.geometry if config is not None else None
            geometry = resolve_geometry(path, wanted)
            if config is None:  # the delay table the store was last run with
                config = StoreConfig(message_delay_level=read_delay_levels(path).text)
            config = replace(config, geometry=geometry).validate()
            save_delay_levels(path, config.delay_levels)
            checkpoint = Checkpoint.open(path / "checkpoint")
            opened.callback(checkpoint.close)
            abnormal = abort_exists(path) if last_stop_clean is None else not last_stop_clean
            crash = repair_crash_files(path, geometry, checkpoint.physic_msg_ms) if abnormal else CrashRepair()
            commitlog = CommitLog.open(path / "commitlog", geometry.commitlog_file_size)
            opened.callback(commitlog.close)
            queues = ConsumeQueueStore.open(path / "consumequeue", geometry.cq_entries_per_file)
            opened.callback(queues.close)
            index = IndexService.open(path / "index", geometry.index_slot_count, geometry.index_entry_count,
                                      now_ms) if config.index_enabled else None
            if index is not None:
                opened.callback(index.close)
            result = recover(commitlog, queues, index, checkpoint, abnormal=abnormal,
                             check_crc=config.check_crc_on_recover, require_prop_crc=geometry.prop_crc,
                             levels=config.delay_levels, cut_queues=crash.cut_queues)
            result = replace(result, repairs=tuple(crash.notes))
            offsets = ConsumerOffsets.load(path / CONSUMER_OFFSET_FILE, now_ms)
            create_abort(path, os.getpid())
            opened.pop_all()
        return cls(path, config, now_ms, lock_fd, commitlog, queues, index, checkpoint, offsets, result)

    def close(self) -> None:
        """Flush everything, then remove the abort marker: the next open recovers normally. When
        derived files are still behind the commitlog, the marker stays and the next open recovers
        abnormally, re-dispatching what they lack (RocketMQ's testDispatchBehindWhenShutdown)."""
        if self._lock_fd < 0:
            return
        self._catch_up()
        self.flush()
        self.offsets.persist(self.path / CONSUMER_OFFSET_FILE)
        if self._dispatch_behind_from is None:
            remove_abort(self.path)
        self.commitlog.close()
        self.queues.close()
        if self.index is not None:
            self.index.close()
        self.checkpoint.close()
        os.close(self._lock_fd)
        self._lock_fd = -1

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- write -------------------------------------------------------------------------------------

    def put(self, message: Message, queue_id: int = 0) -> PutResult:
        return self.put_batch([message], queue_id)[0]

    def put_batch(self, messages: Sequence[Message], queue_id: int | Sequence[int] = 0) -> list[PutResult]:
        """Append many messages with one commitlog copy per file touched; one result per message."""
        queue_ids = [queue_id] * len(messages) if isinstance(queue_id, int) else list(queue_id)
        if len(queue_ids) != len(messages):
            raise ValueError("one queue id per message")
        behind = self._catch_up()
        if behind:
            return [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, reason=behind) for _ in messages]
        outcome = self.writer.write(messages, queue_ids, self.now_ms())
        if outcome.requests:
            try:
                self._dispatch(outcome.requests)
            except OSError:
                # the records are in the commitlog (the truth); their derived entries follow on catch-up,
                # which skips what the consume queues and the index already hold
                self._dispatch_behind_from = outcome.requests[0].phys_offset
            self._last_store_ms = outcome.store_ms
        return outcome.results

    def _catch_up(self) -> str:
        """Dispatch what a failed dispatch left behind; returns why it still cannot, or ""."""
        if self._dispatch_behind_from is None:
            return ""
        start = self._dispatch_behind_from
        try:
            redispatch(self.commitlog, self.queues, self.index, start, start, self.commitlog.max_offset,
                       levels=self.config.delay_levels)
        except OSError as exc:
            return f"consume queue or index cannot be written, sends refused until it can: {exc}"
        self._dispatch_behind_from = None
        return ""

    def _dispatch(self, requests: list[DispatchRequest]) -> None:
        """The records of one write to the consume queues, then to the index: as one batch, or record
        by record when they are too few to pay for numpy's set-up."""
        for request in requests:
            self.queues.dispatch(request)
        if self.index is None:
            return
        if len(requests) < _FEW_RECORDS:
            for r in requests:
                self.index.build(r.topic, r.keys, r.uniq_key, r.phys_offset, r.store_ms, r.sys_flag)
        else:
            batch = DispatchBatch.from_requests(requests)
            self.index.build_hashed(batch.rows, *batch.index_keys())

    @property
    def dispatch_behind_bytes(self) -> int:
        """Commitlog bytes not yet applied to consume queues and index (0 when caught up)."""
        if self._dispatch_behind_from is None:
            return 0
        return self.commitlog.max_offset - self._dispatch_behind_from

    # -- read --------------------------------------------------------------------------------------

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get(topic, queue_id)

    def get(self, topic: str, queue_id: int, queue_offset: int, max_count: int = 32,
            max_bytes: int = 256 * 1024, tags: str | None = None) -> GetResult:
        limits = PullLimits(max_count, max_bytes, self.config.max_transfer_count, self.config.max_transfer_bytes)
        return get_messages(self.queues.get(topic, queue_id), self.commitlog, queue_offset, limits,
                            TagFilter.parse(tags), self.commitlog.max_offset)

    def view_by_id(self, msg_id: str) -> Record | None:
        return view_by_id(self.commitlog, msg_id)

    def query_by_key(self, topic: str, key: str, max_count: int = 64, begin_ms: int = 0,
                     end_ms: int | None = None) -> list[Record]:
        """The newest ``max_count`` records of ``topic`` with ``key`` among their keys, stored in
        [begin_ms, end_ms], oldest first: every one of them, whatever other keys share its hash, but
        never more than ``config.max_query_count`` (64 by default) however many ``max_count`` asks for."""
        if self.index is None:
            return []
        return query_by_key(self.index, self.commitlog, topic, key, min(max_count, self.config.max_query_count),
                            begin_ms, end_ms if end_ms is not None else (1 << 63) - 1)

    def query_by_uniq_key(self, topic: str, uniq_key: str) -> list[Record]:
        if self.index is None:
            return []
        return query_by_key(self.index, self.commitlog, topic, uniq_key, 32, 0, (1 << 63) - 1, uniq=True)

    def queue_offset_by_time(self, topic: str, queue_id: int, ts_ms: int, *, upper: bool = False) -> int:
        cq = self.queues.get(topic, queue_id)
        if cq is None:
            return 0
        return cq.queue_offset_by_time(ts_ms, self.commitlog.store_ms_at, upper=upper)

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.min_queue_offset if cq is not None else 0

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get(topic, queue_id)
        return cq.max_queue_offset if cq is not None else 0

    def topics(self) -> dict[str, list[int]]:
        return self.queues.topics()

    # -- retention ---------------------------------------------------------------------------------

    def clean_expired(self, policy: RetentionPolicy, *, manual: bool = False,
                      used_ratio: float | None = None) -> CleanupDecision:
        """One cleanup round: old commitlog files per ``policy`` and the disk's usage (measured unless
        given), then the consume-queue and index files wholly below the new minimum."""
        now = self.now_ms()
        ratio = disk_used_ratio(self.path) if used_ratio is None else used_ratio
        decision = decide(policy, ratio, now, manual=manual)
        if delete_expired_commitlog(self.commitlog, policy, decision, now):
            delete_derived_below(self.commitlog.min_offset, self.queues, self.index)
        return decision

    # -- consumer offsets --------------------------------------------------------------------------

    def commit_offset(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        self.offsets.commit(group, topic, queue_id, next_offset)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.offsets.query(group, topic, queue_id)

    # -- durability --------------------------------------------------------------------------------

    def flush(self) -> None:
        """Make everything written durable, then record in the checkpoint how far that reaches."""
        self.commitlog.queue.flush_all()
        self.queues.flush(0)
        if self.index is not None:
            self.index.flush()
        if self._last_store_ms:
            self.checkpoint.physic_msg_ms = self._last_store_ms
            self.checkpoint.logics_msg_ms = self._last_store_ms
            if self.index is not None:
                self.checkpoint.index_msg_ms = self._last_store_ms
        self.checkpoint.flush()
