"""AckQueue: one ack-mode (group, topic, queue) as its owning reader holds it.

The queue index (``mqstore.engine.ackindex.queue_index``) is the durable part: every message handed to the
group is published there (seq = its consume-queue offset, msg id = its offsetMsgId bytes), every
first delivery is recorded before the reply goes out, every ack before it is answered. Memory holds
what a crash may forget without losing a message: ``fresh`` (published, never delivered, oldest
first); ``in_flight`` (delivered, not acked: consumer, visibility deadline, delivery count);
``retries`` (due again, ``mqstore.actors.reader.retries``: handed out first, flagged redelivered; the
delays a failed delivery waits come from ``mqstore.actors.reader.ack_queues``); ``dead`` (due for
``%DLQ%{group}``: too many deliveries or a nack without requeue; acked once the writer stored the copy).

After a restart every delivered-unacked message is in ``retry`` with a count of 1 (the index records a
first delivery only): a count lost to a crash errs towards more. Publishing goes a window at a time
(``PUBLISH_AHEAD``). A message moved by ``mqstore.engine.reclaim.move`` keeps its seq and msg id; ``moved``
(``mqstore.actors.reader.moved``) says where it is read, ``relocate`` follows a new copy. ``ack_below``
takes another copy's mark (a slave's master's): everything below it acked. ``purge_below`` is
``mqstore queues purge``: every ready message below a floor acked, those in consumers' hands kept.
"""

from __future__ import annotations

import heapq
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mqstore.actors.reader.retries import Moves, Retries, Retry
from mqstore.engine.ackindex.files import PublishCheck
from mqstore.engine.ackindex.queue_index import PublishEntry, QueueIndex
from mqstore.ipc.wire.receipts import OK, UNKNOWN_RECEIPT, AckStatus

PUBLISH_AHEAD = 2048        # fresh messages kept indexed ahead of the consumers ...
PUBLISH_LOW = 512           # ... topped up when fewer than this are left
MSG_ID_PREFIX_SIZE = 8      # offsetMsgId's host part for IPv4 (address + port)
_PHYS = struct.Struct(">q")
_COMPACT_SLACK = 1024       # stale deadline entries tolerated beyond 3x the in-flight count


@dataclass(frozen=True, slots=True)
class Located:
    """A message of the queue: its seq (consume-queue offset) and where its record is."""

    seq: int
    phys_offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Handout:
    """One delivery ``take`` made."""

    seq: int
    phys_offset: int
    size: int
    redelivered: bool
    delivery_count: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    seq: int
    phys_offset: int
    size: int
    delivery_count: int


@dataclass(slots=True)
class _InFlight:
    consumer: str
    deadline_ms: int
    delivery_count: int
    phys_offset: int
    size: int


def msg_id_prefix(packed_host: bytes) -> bytes:
    """The 8 bytes a publish's msg id starts with: the store host as offsetMsgId packs it (IPv4),
    or the tail of it (IPv6, whose 20 bytes do not fit the index's 16-byte id)."""
    return packed_host[-MSG_ID_PREFIX_SIZE:]


def phys_offset_of(msg_id: bytes) -> int:
    """The commitlog offset a publish's msg id points at: the 8 bytes after the host part."""
    phys_offset: int = _PHYS.unpack_from(msg_id, MSG_ID_PREFIX_SIZE)[0]
    return phys_offset


class AckQueue:
    def __init__(self, index: QueueIndex, host_prefix: bytes, max_deliveries: int,
                 redelivery_delays_ms: tuple[int, ...] = (), moved: Moves | None = None) -> None:
        if len(host_prefix) != MSG_ID_PREFIX_SIZE or max_deliveries < 1:
            raise ValueError("host_prefix must be 8 bytes and max_deliveries at least 1")
        self.index = index
        self._host_prefix = host_prefix
        self.max_deliveries = max_deliveries
        self.fresh: deque[Located] = deque()
        self.retries = Retries(redelivery_delays_ms)
        self.in_flight: dict[int, _InFlight] = {}
        self._per_consumer: dict[str, int] = {}
        self._deadlines: list[tuple[int, int, int]] = []       # (deadline_ms, seq, delivery count)
        self.dead: dict[int, DeadLetter] = {}
        self.scan_from = index.next_seq_id                     # next consume-queue offset to look at
        self.redelivered_count = 0                             # redeliveries handed out since it opened
        self._moved: Moves = moved if moved is not None else {}
        self.relocated_count = 0                               # messages read from a copy since it opened
        self._recover()

    @classmethod
    def open(cls, directory: Path, *, host_prefix: bytes, max_deliveries: int, max_journal_entries: int,
             redelivery_delays_ms: tuple[int, ...] = (), moved: Moves | None = None,
             check_publish: PublishCheck | None = None) -> AckQueue:
        index = QueueIndex.open(directory, max_journal_entries=max_journal_entries, check_publish=check_publish)
        try:
            return cls(index, host_prefix, max_deliveries, redelivery_delays_ms, moved)
        except BaseException:
            index.close(clean=False)
            raise

    def _recover(self) -> None:
        """Sort what the index holds unacked: delivered before this open -> retry, else fresh."""
        per_segment = self.index.entries_per_segment
        for num in self.index.segment_numbers:
            for entry in self.index.read(num * per_segment, (num + 1) * per_segment):
                phys_offset, size = self._where(phys_offset_of(entry.msg_id), entry.size_bytes)
                if entry.delivered:
                    self.retries.recovered(entry.seq_id, Retry(phys_offset, size, 1))
                else:
                    self.fresh.append(Located(entry.seq_id, phys_offset, size))
        self.retries.heapify()

    # -- state ---------------------------------------------------------------------------------------

    @property
    def has_available(self) -> bool:
        return bool(self.fresh) or self.retries.has_due

    @property
    def retry_count(self) -> int:
        return len(self.retries)

    def counts(self, max_queue_offset: int) -> dict[str, int]:
        """What the metrics show of the queue: ready (due again, indexed and not yet handed out, and
        what the consume queue holds past what was indexed, up to ``max_queue_offset``), unacked (in
        consumers' hands), redelivered (handed out again since the queue opened), dead (waiting for
        ``%DLQ%{group}``)."""
        backlog = max(max_queue_offset - self.scan_from, 0)
        return {"ready": len(self.fresh) + self.retry_count + backlog, "unacked": len(self.in_flight),
                "redelivered": self.redelivered_count, "dead": len(self.dead)}

    def in_flight_of(self, consumer: str) -> int:
        return self._per_consumer.get(consumer, 0)

    def publish_room(self) -> int:
        """How many more messages to index now (0 while enough are waiting)."""
        return PUBLISH_AHEAD - len(self.fresh) if len(self.fresh) < PUBLISH_LOW else 0

    def lowest_unacked_phys(self) -> int | None:
        """The lowest commitlog offset of a message not acked (None: every message is): the oldest
        message's, unless messages were moved, which puts a younger one lowest."""
        if not self.index.unacked_count:
            return None
        if self.relocated_count:
            return min((phys for phys, _ in self.unacked_located().values()), default=None)
        seq = self.index.lowest_unacked_seq_id()
        entries = self.index.read(seq, seq + 1)
        return self._where(phys_offset_of(entries[0].msg_id), entries[0].size_bytes)[0] if entries else None

    def unacked_located(self) -> dict[int, tuple[int, int]]:
        """seq -> (commitlog offset, size) of every message indexed and not acked: fresh, in flight,
        due again, dead."""
        held = {m.seq: (m.phys_offset, m.size) for m in self.fresh}
        held.update((seq, (r.phys_offset, r.size)) for seq, r in self.retries.items())
        held.update((seq, (f.phys_offset, f.size)) for seq, f in self.in_flight.items())
        held.update((seq, (d.phys_offset, d.size)) for seq, d in self.dead.items())
        return held

    def next_deadline_ms(self) -> int | None:
        while self._deadlines and not self._live(self._deadlines[0]):
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def next_retry_ms(self) -> int | None:
        """When the next waiting redelivery is due (None: none waits)."""
        return self.retries.next_ms()

    def promote(self, now_ms: int) -> int:
        """Waiting redeliveries due by ``now_ms`` become available; returns how many."""
        return self.retries.promote(now_ms)

    # -- changes -------------------------------------------------------------------------------------

    def publish(self, located: list[Located], scanned_to: int) -> None:
        """Index ``located`` (rising seqs at or past ``scan_from``); everything before ``scanned_to``
        has been looked at (what is not in ``located`` was skipped: fillers, gone, filtered out)."""
        if located:
            self.index.publish_many(PublishEntry(m.seq, self._host_prefix + _PHYS.pack(m.phys_offset), m.size)
                                    for m in located)
            self.fresh.extend(Located(m.seq, *self._where(m.phys_offset, m.size)) for m in located)
        self.scan_from = max(self.scan_from, scanned_to)

    def take(self, consumer: str, max_count: int, now_ms: int, visibility_ms: int) -> list[Handout]:
        """Hand out up to ``max_count`` messages to ``consumer``: due redeliveries first, then fresh
        ones, oldest first. First deliveries are in the journal before this returns."""
        self.retries.promote(now_ms)
        out = [Handout(seq, r.phys_offset, r.size, True, r.delivery_count + 1)
               for seq, r in self.retries.take(max_count)]
        first = len(out)
        self.redelivered_count += first
        while self.fresh and len(out) < max_count:
            m = self.fresh.popleft()
            out.append(Handout(m.seq, m.phys_offset, m.size, False, 1))
        if len(out) > first:
            self.index.deliver(h.seq for h in out[first:])
        deadline_ms = now_ms + visibility_ms
        for h in out:
            self.in_flight[h.seq] = _InFlight(consumer, deadline_ms, h.delivery_count, h.phys_offset, h.size)
            heapq.heappush(self._deadlines, (deadline_ms, h.seq, h.delivery_count))
        if out:
            self._per_consumer[consumer] = self._per_consumer.get(consumer, 0) + len(out)
            if len(self._deadlines) > 3 * len(self.in_flight) + _COMPACT_SLACK:
                self._deadlines = [(f.deadline_ms, seq, f.delivery_count) for seq, f in self.in_flight.items()]
                heapq.heapify(self._deadlines)
        return out

    def ack(self, seqs: Iterable[int]) -> list[AckStatus]:
        """Ack delivered messages (in flight, due again, or waiting for the DLQ); one status each.
        Everything accepted is in the journal before this returns."""
        statuses: list[AckStatus] = []
        accepted: list[int] = []
        for seq in seqs:
            if self._forget(seq):
                accepted.append(seq)
                statuses.append(OK)
            elif seq in self.dead:
                del self.dead[seq]  # a copy may be on its way to the DLQ: its reply finds nothing
                accepted.append(seq)
                statuses.append(OK)
            else:
                statuses.append(UNKNOWN_RECEIPT)
        if accepted:
            self.index.ack(accepted)
        return statuses

    def nack(self, seqs: Iterable[int], *, requeue: bool, now_ms: int = 0) -> list[AckStatus]:
        """Give delivered messages back: due again after their redelivery delay (``requeue``; past
        ``max_deliveries`` they go to the DLQ instead), or dead-lettered now."""
        statuses: list[AckStatus] = []
        for seq in seqs:
            flight = self.in_flight.get(seq)
            retry = self.retries.get(seq)
            if flight is not None:
                self._release(seq, flight)
                located, count = Located(seq, flight.phys_offset, flight.size), flight.delivery_count
            elif retry is not None:
                if requeue:
                    statuses.append(OK)  # already due again
                    continue
                self.retries.remove(seq)
                located, count = Located(seq, retry.phys_offset, retry.size), retry.delivery_count
            else:
                statuses.append(UNKNOWN_RECEIPT)
                continue
            if requeue:
                self._give_back(located, count, now_ms)
            else:
                self.dead[seq] = DeadLetter(seq, located.phys_offset, located.size, count)
            statuses.append(OK)
        return statuses

    def expire(self, now_ms: int) -> int:
        """Deliveries past their visibility deadline come back; returns how many."""
        count = 0
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            entry = heapq.heappop(self._deadlines)
            if not self._live(entry):
                continue
            seq = entry[1]
            flight = self.in_flight[seq]
            self._release(seq, flight)
            self._give_back(Located(seq, flight.phys_offset, flight.size), flight.delivery_count, now_ms)
            count += 1
        return count

    def release(self, consumer: str, read: set[int]) -> int:
        """A consumer leaves: every delivery it holds is due again at once (flagged redelivered).
        Only those its application ``read`` count towards ``max_deliveries``: the rest were still
        in its client's buffer or on the wire."""
        mine = [(seq, f) for seq, f in self.in_flight.items() if f.consumer == consumer]
        for seq, flight in mine:
            self._release(seq, flight)
            count = flight.delivery_count if seq in read else flight.delivery_count - 1
            self._give_back(Located(seq, flight.phys_offset, flight.size), count)
        return len(mine)

    def ack_below(self, seq: int) -> int:
        """Every message below ``seq`` acked (``QueueIndex.ack_below``) and forgotten here; how many."""
        acked = self.index.ack_below(seq)
        while self.fresh and self.fresh[0].seq < seq:
            self.fresh.popleft()
        for held in [s for s in (*self.in_flight, *(r for r, _ in self.retries.items()), *self.dead) if s < seq]:
            self._forget(held) or self.dead.pop(held)  # a receipt for it answers UNKNOWN_RECEIPT
        self.scan_from = max(self.scan_from, seq)
        return acked

    def purge_below(self, floor: int, last: Located | None) -> tuple[int, int]:
        """Ack every ready message below ``floor``: indexed and never delivered (``fresh``), due again
        (after a nack, a timeout, a restart), and those not indexed yet (by publishing and acking
        ``last``, the last of them, which moves the index's next seq id past them all). Messages in
        consumers' hands and dead letters on their way to the DLQ stay. The journal is fsynced before
        this returns. Returns how many were purged and how many stay unacked with consumers."""
        fresh = [m.seq for m in self.fresh if m.seq < floor]
        due_again = [seq for seq, _ in self.retries.items() if seq < floor]
        backlog = max(floor - self.scan_from, 0)
        if due_again:
            self.ack(due_again)
        if fresh:
            self.index.ack(fresh)
            self.fresh = deque(m for m in self.fresh if m.seq >= floor)
        if backlog and last is not None and last.seq >= self.index.next_seq_id:
            self.index.publish_many([PublishEntry(last.seq, self._host_prefix + _PHYS.pack(last.phys_offset),
                                                  last.size)])
            self.index.ack([last.seq])
        self.scan_from = max(self.scan_from, floor)
        self.index.sync()
        return len(fresh) + len(due_again) + backlog, len(self.in_flight)

    def dead_lettered(self, seqs: Iterable[int]) -> None:
        """The DLQ holds these now: ack them."""
        done = [seq for seq in seqs if self.dead.pop(seq, None) is not None]
        if done:
            self.index.ack(done)

    def relocate(self, moves: Moves) -> int:
        """Messages at an offset in ``moves`` are read from their copies now (seqs, delivery counts and
        deadlines stay); returns how many."""
        count = 0
        for i, m in enumerate(self.fresh):
            if m.phys_offset in moves:
                self.fresh[i] = Located(m.seq, *moves[m.phys_offset])
                count += 1
        count += self.retries.relocate(moves)
        for f in self.in_flight.values():
            if f.phys_offset in moves:
                f.phys_offset, f.size = moves[f.phys_offset]
                count += 1
        for seq, d in list(self.dead.items()):
            if d.phys_offset in moves:
                self.dead[seq] = DeadLetter(seq, *moves[d.phys_offset], d.delivery_count)
                count += 1
        self.relocated_count += count
        return count

    def close(self, *, clean: bool) -> None:
        self.index.close(clean=clean)

    # -- internals -----------------------------------------------------------------------------------

    def _where(self, phys_offset: int, size: int) -> tuple[int, int]:
        """Where a message indexed at ``phys_offset`` is read from: its copy's place if it was moved."""
        if self._moved and phys_offset in self._moved:
            self.relocated_count += 1
            return self._moved[phys_offset]
        return phys_offset, size

    def _live(self, entry: tuple[int, int, int]) -> bool:
        flight = self.in_flight.get(entry[1])
        return flight is not None and flight.delivery_count == entry[2] and flight.deadline_ms == entry[0]

    def _release(self, seq: int, flight: _InFlight) -> None:
        del self.in_flight[seq]
        left = self._per_consumer[flight.consumer] - 1
        if left:
            self._per_consumer[flight.consumer] = left
        else:
            del self._per_consumer[flight.consumer]

    def _forget(self, seq: int) -> bool:
        flight = self.in_flight.get(seq)
        if flight is not None:
            self._release(seq, flight)
            return True
        return self.retries.remove(seq) is not None

    def _give_back(self, located: Located, delivery_count: int, failed_at_ms: int | None = None) -> None:
        """Due again: at once, or (a failed delivery, ``failed_at_ms``) after its redelivery delay."""
        if delivery_count >= self.max_deliveries:
            self.dead[located.seq] = DeadLetter(located.seq, located.phys_offset, located.size, delivery_count)
            return
        self.retries.add(located.seq, Retry(located.phys_offset, located.size, delivery_count), failed_at_ms)
