"""Consumed commitlog files: what holds each one, and how far the log is consumed by every group
(RabbitMQ's message-store reclamation, on RocketMQ's files; retention's ``reclaim_consumed``).

A *holder* is one group's first record not yet consumed on one queue:

- an offset-mode group (``config/consumerOffset.json``): the first live entry at or past its
  committed offset, on every queue of every topic it committed on (a queue it never committed on
  is held from its first entry);
- an ack-mode group (a queue index directory under ``queueindex/``): the first entry at or past its
  ``acked_below`` in its reader's mark (``mqstore.engine.ackindex.low_water.AckProgress``); a queue of the
  group's topics with no index, or whose progress no mark holds yet, is held from its first entry;
- a topic no group has state for is held from its first entry (``NO_GROUP``): its records wait for
  the retention clock, as in RocketMQ, instead of going as RabbitMQ drops a message no queue takes;
- an ack-mode group whose mark holds its progress holds the files its reader counted its unacked
  messages in (``unacked_by_file``: a message moved by ``mqstore.engine.reclaim.move`` counts in its copy's
  file), and its messages not indexed yet from the first of them. The moved topic's own queue holds
  nothing: a copy is held by the groups that count it.

Only what is durable is read: the persisted offsets (a commit the reader has not written yet holds
its file), the marks the readers write after the acks reached the queue index, and the consume-queue
files. ``Consumption.consumed_end`` is the lowest holder's record, capped at what the consume-queue
builder has dispatched (a record not dispatched yet has no entry that could say who needs it); a
commitlog file ending at or below it holds nothing anyone still needs. Deleting is retention's:
oldest first, never the newest, never past a held file.

``ConsumedFiles.describe`` says per file who holds it and with how many messages: what status and
metrics show, and what a mover of stragglers (a file held only by a few unacked messages) would
consult (``plan_move``). Counts come from binary searches over the consume queues (a filler entry can
make one off).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mqstore.engine.ackindex.low_water import AckProgress, queue_index_keys, read_ack_progress
from mqstore.engine.consumequeue.consume_queue import ConsumeQueue
from mqstore.engine.consumequeue.entry import CQ_ENTRY_SIZE, entry_holds_message, entry_live
from mqstore.engine.consumequeue.store import NO_BATCH, ConsumeQueueStore
from mqstore.engine.errors import MqstoreError
from mqstore.engine.log.open_files import OpenFiles
from mqstore.engine.meta.metafile import MetafileError, read_with_backup
from mqstore.engine.meta.offsets import CONSUMER_OFFSET_FILE, TOPIC_GROUP_SEPARATOR, decode_offset_file
from mqstore.engine.reclaim.move import MOVED_TOPIC
from mqstore.engine.reclaim.retention import file_may_go

OFFSET = "offset"
ACK = "ack"
NO_GROUP = "no group"
_PHYS = struct.Struct(">q")  # a consume-queue entry's first field
_FIRST_WINDOW = 64        # entries read at once looking for a holder's first live record


class ReclaimError(MqstoreError):
    """The durable state cannot be read: nothing may be reclaimed this round."""


@dataclass(frozen=True, slots=True)
class Holder:
    """One group's first record not consumed on one queue (``NO_GROUP``: a topic nobody consumes)."""

    kind: str
    group: str
    topic: str
    queue_id: int
    queue_offset: int   # the first queue offset not consumed
    phys_offset: int    # where its record starts in the commitlog
    queue_end: int      # one past the queue's last dispatched entry, when it was read
    progress: AckProgress | None = None


@dataclass(frozen=True, slots=True)
class Consumption:
    """What the durable state said at one moment."""

    dispatched_end: int             # the consume queues cover the commitlog up to here
    holders: tuple[Holder, ...]     # only those with a record not consumed

    @property
    def consumed_end(self) -> int:
        """Every record below this offset is consumed by every group that needs it."""
        return min([self.dispatched_end, *(h.phys_offset for h in self.holders)])

    def may_go(self, file_end: int) -> bool:
        return file_may_go(file_end, self.consumed_end)


@dataclass(frozen=True, slots=True)
class FileHold:
    holder: Holder
    messages: int       # its records in the file not consumed (ack mode: unacked, or not indexed yet)


@dataclass(frozen=True, slots=True)
class HeldFile:
    file_base: int
    file_end: int
    expires_ms: int             # when the retention clock lets it go
    newest: bool                # the file being written: never reclaimed
    undispatched: bool          # records in it have no consume-queue entry yet
    holds: tuple[FileHold, ...]  # the groups with records in it they have not consumed

    @property
    def reclaimable(self) -> bool:
        return not (self.newest or self.undispatched or self.holds)


class ConsumedFiles:
    """Read-only maps of the consume queues, kept between rounds (only new and deleted ones change)."""

    def __init__(self, store_dir: Path, entries_per_file: int, reader_count: int,
                 open_files: OpenFiles | None = None) -> None:
        self.store_dir = store_dir
        self.reader_count = reader_count
        self.queues = ConsumeQueueStore(store_dir / "consumequeue", entries_per_file, writable=False,
                                        open_files=open_files)
        self.queues.refresh()  # so that the first read's dispatched end already covers them

    def close(self) -> None:
        self.queues.close()

    # -- the decision ------------------------------------------------------------------------------

    def read(self, commitlog_min: int) -> Consumption:
        """Every holder, from the files; raises ``ReclaimError`` when the offsets file cannot be read."""
        dispatched_end = self._dispatched_end()  # before the queue listing: see _dispatched_end
        self._refresh_queues()
        try:
            offsets = read_with_backup(self.store_dir / CONSUMER_OFFSET_FILE, decode_offset_file)
        except (OSError, MetafileError) as exc:
            raise ReclaimError(f"consumer offsets unreadable: {exc}") from exc
        committed: dict[str, dict[str, dict[int, int]]] = {}  # topic -> group -> queue -> next offset
        for key, queue_offsets in (offsets.table if offsets is not None else {}).items():
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            committed.setdefault(topic, {})[group] = dict(queue_offsets)
        ack_groups: dict[str, set[str]] = {}
        for group, topic, _ in queue_index_keys(self.store_dir):
            ack_groups.setdefault(topic, set()).add(group)
        progress = read_ack_progress(self.store_dir, self.reader_count)
        holders: list[Holder] = []
        for (topic, queue_id), cq in sorted(self.queues.queues.items()):
            lo, end = _live_span(cq)
            if topic == MOVED_TOPIC:
                continue  # a copy is held by the groups whose marks count it, not by its topic
            offset_groups = committed.get(topic, {})
            groups: list[tuple[str, str, int, AckProgress | None]] = [
                (OFFSET, g, offset_groups[g].get(queue_id, -1), None) for g in sorted(offset_groups)]
            for group in sorted(ack_groups.get(topic, ())):
                p = progress.get((group, topic, queue_id))
                groups.append((ACK, group, p.acked_below if p is not None else -1, p))
            if not groups:
                groups.append((NO_GROUP, "", -1, None))
            for kind, group, queue_offset, p in groups:
                if p is None:
                    first = _first_live(cq, max(queue_offset, lo), end, commitlog_min)
                    if first is not None:
                        holders.append(Holder(kind, group, topic, queue_id, first[0], first[1], end, p))
                    continue
                # indexed messages hold the files their reader counted them in (a moved one: its copy's),
                # from no lower than the first one's entry when it is still there (a message is never
                # moved down); the rest hold from the first entry not indexed yet
                first = _first_live(cq, max(p.indexed_to, lo), end, commitlog_min)
                oldest = _first_live(cq, max(p.acked_below, lo), end, commitlog_min)
                floor = oldest[1] if oldest is not None and oldest[0] == p.acked_below else -1
                held = [max(base, floor) for base, n in p.unacked_by_file.items() if n > 0 and base >= commitlog_min]
                if held or first is not None:
                    phys = min([*held, *([first[1]] if first is not None else [])])
                    queue_offset = max(p.acked_below, lo) if held or first is None else first[0]
                    holders.append(Holder(kind, group, topic, queue_id, queue_offset, phys, end, p))
        return Consumption(dispatched_end, tuple(holders))

    def _dispatched_end(self) -> int:
        """How far the consume queues cover the commitlog. Read before the queue directories are
        listed: an entry below it is in a batch that completed, so its queue's directory exists by
        then; a batch still being written across queues is cut at its start (the ``.dispatching`` mark)."""
        for cq in self.queues:
            cq.max_phys_end = _last_phys_end(cq)
        end = max(self.queues.max_phys_end(), self.queues.applied_floor())
        batch = self.queues.dispatching_from()
        return end if batch == NO_BATCH else min(end, batch)

    def _refresh_queues(self) -> None:
        for key, cq in list(self.queues.queues.items()):
            if not cq.queue.directory.is_dir():  # a deleted topic
                self.queues.queues.pop(key).close()
        self.queues.refresh()

    # -- what holds each file ----------------------------------------------------------------------

    def describe(self, consumption: Consumption, files: Sequence[tuple[int, int, int]]) -> list[HeldFile]:
        """``files``: (file base, file end, expires ms) of commitlog files, oldest first, the last
        the newest (the one being written)."""
        lows: dict[tuple[str, int], int] = {}  # per queue, the lowest holder's queue offset
        for h in consumption.holders:
            lows[(h.topic, h.queue_id)] = min(h.queue_offset, lows.get((h.topic, h.queue_id), h.queue_offset))
        at: dict[tuple[str, int, int], int] = {}  # (topic, queue, phys) -> first queue offset at or past it

        def first_at(h: Holder, phys_offset: int) -> int:
            key = (h.topic, h.queue_id, phys_offset)
            if key not in at:
                cq = self.queues.queues.get((h.topic, h.queue_id))
                at[key] = _first_at(cq, phys_offset, lows[(h.topic, h.queue_id)], h.queue_end) if cq else h.queue_end
            return at[key]

        def messages_in(h: Holder, base: int, end: int) -> int:
            unacked, from_qo = 0, h.queue_offset
            if h.kind == ACK and h.progress is not None:  # indexed: what the mark counted; the rest: every entry
                unacked, from_qo = h.progress.unacked_by_file.get(base, 0), max(h.progress.indexed_to, from_qo)
            return unacked + max(0, first_at(h, end) - max(first_at(h, base), from_qo))

        described = []
        for i, (base, end, expires_ms) in enumerate(files):
            holds = [FileHold(h, n) for h in consumption.holders if h.phys_offset < end
                     and (n := messages_in(h, base, end)) > 0]
            described.append(HeldFile(base, end, expires_ms, i == len(files) - 1,
                                      end > consumption.dispatched_end, tuple(holds)))
        return described


def _entries(cq: ConsumeQueue, queue_offset: int, count: int) -> Iterable[tuple[int, int]]:
    rows = cq.read(queue_offset, count)
    return zip(rows["phys_offset"].tolist(), rows["size"].tolist(), strict=True)


def _live_span(cq: ConsumeQueue) -> tuple[int, int]:
    """The queue's first entry still in a file, and one past its last valid one."""
    end = cq.searched_valid_end()  # maps new files, forgets deleted ones
    cq.min_logic_pos = max(cq.min_logic_pos, cq.queue.min_offset)
    return cq.min_queue_offset, end


def _last_phys_end(cq: ConsumeQueue) -> int:
    lo, end = _live_span(cq)
    if end <= lo:
        return -1
    for phys, size in _entries(cq, end - 1, 1):
        return phys + size if entry_holds_message(phys, size) else -1
    return -1


def _first_live(cq: ConsumeQueue, queue_offset: int, end: int, commitlog_min: int) -> tuple[int, int] | None:
    """(queue offset, phys offset) of the first entry at or past ``queue_offset`` whose record is
    still in the commitlog; None when there is none before ``end``."""
    window = _FIRST_WINDOW
    while queue_offset < end:
        count = min(window, end - queue_offset)
        for i, (phys, size) in enumerate(_entries(cq, queue_offset, count)):
            if entry_live(phys, size, commitlog_min):
                return queue_offset + i, phys
        queue_offset += count
        window *= 4
    return None


def _first_at(cq: ConsumeQueue, phys_offset: int, lo: int, hi: int) -> int:
    """The first queue offset in [lo, hi) whose record starts at or past ``phys_offset`` (``hi``: none)."""
    while lo < hi:
        mid = (lo + hi) // 2
        mf = cq.queue.find(mid * CQ_ENTRY_SIZE)
        if mf is None or _PHYS.unpack_from(mf.buffer, mid * CQ_ENTRY_SIZE - mf.file_base)[0] >= phys_offset:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True, slots=True)
class MovePlan:
    """The stragglers of one file: (phys offset, size) of each record, oldest first, each once."""

    file_base: int
    file_end: int
    stragglers: tuple[tuple[int, int], ...]

    @property
    def straggler_bytes(self) -> int:
        return sum(size for _, size in self.stragglers)


def plan_move(files: Sequence[HeldFile], share: float) -> MovePlan | None:
    """The oldest held file, when only ack-mode groups' unacked messages hold it, every one of them is
    listed in its group's mark (``AckProgress.stragglers``), and their bytes are below ``share`` of the
    file; None otherwise (a file nobody holds goes without a move; files past the oldest held one
    cannot go before it, so they wait)."""
    for held in files:
        if held.newest or held.undispatched:
            return None
        if not held.holds:
            continue
        stragglers: set[tuple[int, int]] = set()
        for hold in held.holds:
            p = hold.holder.progress
            if hold.holder.kind != ACK or p is None:
                return None
            listed = [(phys, size) for phys, size in p.stragglers if held.file_base <= phys < held.file_end]
            if len(listed) != hold.messages:
                return None  # not every message it holds there is listed (or some are not indexed yet)
            stragglers.update(listed)
        plan = MovePlan(held.file_base, held.file_end, tuple(sorted(stragglers)))
        return plan if plan.straggler_bytes < share * (held.file_end - held.file_base) else None
    return None


__all__ = ["ACK", "NO_GROUP", "OFFSET", "ConsumedFiles", "Consumption", "FileHold", "HeldFile",
           "Holder", "MovePlan", "ReclaimError", "plan_move"]
