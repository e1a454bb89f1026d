"""How far each delay level is delivered, kept in ``config/delayOffset.json``, and none delivered twice.

In memory, per level: ``offsets[level]``, the next schedule-queue offset to deliver (every entry
below it has its copy on the real topic, or was skipped), and ``ahead[level]``: entries past it whose
copies are already stored (a send in which an earlier entry was refused and is retried; or copies a
restart found), each with the real topic and queue its copy went to. The scheduler sends an entry
only when ``ahead`` does not hold it with the same real topic and queue.

Saved (``save``, at most every ``SAVE_INTERVAL_MS`` and on stop): first ``delayOffset.json``
(RocketMQ's file, ``mqstore.engine.delay.offsets``), then the re-put floor: a commitlog offset at or below
every copy that offsets do not cover yet, i.e. the lowest copy held in ``ahead`` or, with none, the
last copy the writer confirmed (every later send lands after it), or, while nothing is in flight or
ahead, the end the consume-queue builder last announced (``idle_at``). An entry given up on (its
record gone with retention, a copy refused for good) is passed in order like a delivered one.

Data first, then the mark: a copy answered PUT_OK under ASYNC_FLUSH (or FLUSH_DISK_TIMEOUT) is in the
page cache, not on the disk, so a state that counts it waits in memory (``mqstore.actors.flushed``) and
reaches the files only once the flush service says the commitlog is durable past every copy it
counts (``on_flushed``). Delivery goes on meanwhile; a power cut loses at most copies the saved
offsets do not count, and those entries are delivered again after it.

A SIGKILL at any instant leaves the file's offsets at or behind the truth, and the floor at or
below every copy made since; the next start (``recover``) reads the commitlog from the floor to its
end and puts every copy it finds (by its ``DELAY_OFFSET`` property) at or past the saved offsets
into ``ahead``, so those entries are not sent again. A write torn between the two files leaves an
older floor: more to read, the same answer. What is sent and unanswered when the writer dies is
recovered the same way once the scheduler gives up waiting (``mqstore.actors.scheduler.actor``).

The one case that can still repeat a copy: a send the writer takes after the scheduler gave up on
it (a writer stalled longer than the reply timeout, then alive again); the scheduler's socket to the
old writer is closed without linger, so a send to a dead writer is never delivered later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from mqstore.actors.flushed import DurableGate
from mqstore.actors.scheduler.schedule import delay_offset_of
from mqstore.engine.delay.offsets import read_delay_offsets, read_reput_floor, write_delay_offsets, write_reput_floor
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.record import DecodeKind

log = logging.getLogger("mqstore")

SAVE_INTERVAL_MS = 500
FLOOR_STEP_BYTES = 64 << 20
VERSION_STEP = 200  # RocketMQ's delayOffsetUpdateVersionStep: dataVersion advances every 200 updates


@dataclass(frozen=True, slots=True)
class Copy:
    """A copy stored on a real topic: where it went and its commitlog offset."""

    topic: str
    queue_id: int
    phys_offset: int


@dataclass(frozen=True, slots=True)
class Saved:
    """A state to write: the offsets, the floor below every copy they do not count, its data version."""

    offsets: dict[int, int]
    floor: int
    counter: int
    now_ms: int


@dataclass(slots=True)
class Progress:
    store_dir: Path
    max_level: int
    offsets: dict[int, int] = field(default_factory=dict)
    ahead: dict[int, dict[int, Copy | None]] = field(default_factory=dict)  # None: given up on
    last_copy_phys: int = 0  # the saved floor at start, then the last copy confirmed
    updates: int = 0
    counter: int = 0
    dirty: bool = False
    next_save_ms: int = 0
    saved_floor: int = 0
    stored_end: int = 0  # past the first byte of every copy counted: the commitlog durable to here first
    gate: DurableGate[Saved] = field(default_factory=DurableGate)

    @classmethod
    def load(cls, store_dir: Path, max_level: int, commitlog: CommitLog) -> Progress:
        """The saved offsets and floor; a first start saves a floor at the last commitlog file (every
        copy it makes lands past it) before it sends anything."""
        saved = read_delay_offsets(store_dir)
        offsets = {level: max(0, saved.offsets.get(level, 0)) for level in range(1, max_level + 1)}
        floor = read_reput_floor(store_dir)
        if floor is None:
            commitlog.queue.refresh()
            last = commitlog.queue.last_file
            floor = last.file_base if last is not None else 0
            write_reput_floor(store_dir, floor)
        return cls(store_dir, max_level, offsets, {level: {} for level in offsets}, floor, counter=saved.counter,
                   saved_floor=floor)

    def clamp(self, level: int, low: int, high: int) -> None:
        """RocketMQ's correctDelayOffset: an offset outside the queue's entries is moved into them."""
        corrected = min(max(self.offsets[level], low), high)
        if corrected != self.offsets[level]:
            log.warning("delay level %d: offset %d corrected to %d (queue holds %d..%d)",
                        level, self.offsets[level], corrected, low, high)
            self.offsets[level] = corrected
            self.dirty = True

    def recover(self, commitlog: CommitLog) -> int:
        """Copies stored since the floor (read from there to the commitlog's end): into ``ahead``.
        Returns how many."""
        floor = self.floor()
        found = 0
        commitlog.queue.refresh()
        for phys, decoded in commitlog.scan(max(floor, commitlog.min_offset), check_crc=False, read_body=False):
            record = decoded.record
            if decoded.kind is not DecodeKind.RECORD or record is None:
                continue
            at = delay_offset_of(record.properties)
            if at is not None and at[0] in self.offsets and at[1] >= self.offsets[at[0]]:
                self.ahead[at[0]][at[1]] = Copy(record.topic, record.queue_id, phys)
                self.last_copy_phys = max(self.last_copy_phys, phys)
                found += 1
        return found

    def already_stored(self, level: int, queue_offset: int, real: tuple[str, int] | None) -> bool:
        copy = self.ahead[level].get(queue_offset)
        return copy is not None and (copy.topic, copy.queue_id) == real

    def given_up(self, level: int, queue_offset: int) -> bool:
        ahead = self.ahead[level]
        return queue_offset in ahead and ahead[queue_offset] is None

    def idle_at(self, phys_offset: int) -> None:
        """Nothing is in flight and the commitlog is dispatched to ``phys_offset`` (a record boundary):
        every copy still to come lands past it, so the floor may move there once none waits ahead
        (saved when it moved ``FLOOR_STEP_BYTES``: a restart never reads far back)."""
        if any(self.ahead.values()) or phys_offset <= self.last_copy_phys:
            return
        if phys_offset - self.saved_floor >= FLOOR_STEP_BYTES:
            self.dirty = True
        self.last_copy_phys = phys_offset

    def delivered(self, level: int, queue_offset: int, copy: Copy | None) -> None:
        """The entry's copy is stored (``copy``), or it is given up on (None): the level moves past it."""
        if copy is not None:
            self.last_copy_phys = max(self.last_copy_phys, copy.phys_offset)
            self.stored_end = max(self.stored_end, copy.phys_offset + 1)
        if queue_offset < self.offsets[level]:
            return
        if queue_offset != self.offsets[level]:
            self.ahead[level][queue_offset] = copy
            return
        self.offsets[level] = queue_offset + 1
        ahead = self.ahead[level]
        ahead.pop(queue_offset, None)
        while self.offsets[level] in ahead:
            del ahead[self.offsets[level]]
            self.offsets[level] += 1
        self.updates += 1
        self.dirty = True

    def floor(self) -> int:
        lows = [c.phys_offset for level in self.ahead.values() for c in level.values() if c is not None]
        return min(lows) if lows else self.last_copy_phys

    def on_flushed(self, flushed_end: int) -> None:
        """The commitlog is durable below ``flushed_end``."""
        self.gate.on_flushed(flushed_end)

    def save(self, now_ms: int, mono_ms: int, *, force: bool = False) -> None:
        """The current state waits for the flush (at most every ``SAVE_INTERVAL_MS``, or now with
        ``force``); the newest state the flush covers is written."""
        if self.dirty and (force or mono_ms >= self.next_save_ms):
            if self.updates >= VERSION_STEP or self.counter == 0:
                self.counter += 1
                self.updates = 0
            self.gate.offer(self.stored_end, Saved(dict(self.offsets), self.floor(), self.counter, now_ms))
            self.dirty = False
            self.next_save_ms = mono_ms + SAVE_INTERVAL_MS
        saved = self.gate.take()
        if saved is not None:
            write_delay_offsets(self.store_dir, saved.offsets, saved.counter, saved.now_ms)
            write_reput_floor(self.store_dir, saved.floor)
            self.saved_floor = saved.floor
