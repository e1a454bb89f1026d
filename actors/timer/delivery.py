"""The dequeue's progress, live in memory, and what of it reaches ``config/timercheck``.

The checkpoint's delivery fields (``mqstore.engine.timer.checkpoint``: the slot read, the last timerlog
offset delivered in it, and ``in_flight_phys``) are stores into a mapping: the kernel may write them
back at any moment. So the loop works on the copies here, and a state reaches the mapping only once
the flush service says the commitlog is durable past every copy it counts (``mqstore.actors.flushed``):
a power cut then keeps no mark of a delivery whose copy it lost.

The state written carries, as ``in_flight_phys``, a commitlog offset at or below every copy made for
a record it does not count: the batch in flight, the copies a previous run made past what it had
written (until every slot due at this start is delivered), and otherwise the further of the flushed
end and the start of the last batch completed (every later copy lands past both). A restart reads the
commitlog from there for copies already made (``mqstore.actors.timer.reput.copies_since``).

A state also counts the timer records it delivered as enqueued: it reaches the mapping only once the
checkpoint's ``next_queue_offset`` there covers every entry enqueued when it was taken (the enqueue's
mark, written at the timer's flush behind the timerlog it counts, ``mqstore.actors.timer.enqueued``).
Ahead of it, a power cut could keep a slot marked read and lose the timerlog records delivered in it:
recovery enqueues those entries again, into the slot being read, and delivers them a second time.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqstore.actors.flushed import DurableGate
from mqstore.engine.timer.checkpoint import TimerCheckpoint


@dataclass(frozen=True, slots=True)
class DeliveryMark:
    last_read_ms: int
    delivered_slot_ms: int
    delivered_pos: int
    in_flight_phys: int
    enqueued_through: int  # the enqueue's next queue offset when taken: every record delivered is below it


class Delivery:
    def __init__(self, checkpoint: TimerCheckpoint, recovered_until_ms: int) -> None:
        self.checkpoint = checkpoint
        self.last_read_ms = checkpoint.last_read_ms
        self.delivered_slot_ms = checkpoint.delivered_slot_ms
        self.delivered_pos = checkpoint.delivered_pos
        self.in_flight_phys = checkpoint.in_flight_phys
        self.recovered_floor = checkpoint.in_flight_phys  # copies of the last run past its written mark
        self.recovered_until_ms = recovered_until_ms
        self.batch_floor = -1   # where the last batch completed could be stored from
        self.stored_end = 0     # past the first byte of every copy stored
        self.gate: DurableGate[DeliveryMark] = DurableGate()  # waits for the commitlog's flush
        self.enqueue_gate: DurableGate[DeliveryMark] = DurableGate()  # then for the enqueue's mark

    @property
    def waiting(self) -> bool:
        """Whether a state waits for the commitlog's flush or the enqueue's mark."""
        return bool(len(self.gate) or len(self.enqueue_gate))

    def batch_done(self, floor: int) -> None:
        """A batch stored from ``floor`` on is complete (its records counted delivered)."""
        self.batch_floor = max(self.batch_floor, floor)
        self.in_flight_phys = -1

    def mark(self, enqueued_through: int) -> DeliveryMark:
        floors = [max(self.gate.flushed_end, self.batch_floor)]
        if self.in_flight_phys >= 0:
            floors.append(self.in_flight_phys)
        if self.recovered_floor >= 0 and self.last_read_ms < self.recovered_until_ms:
            floors.append(self.recovered_floor)
        return DeliveryMark(self.last_read_ms, self.delivered_slot_ms, self.delivered_pos, min(floors),
                            enqueued_through)

    def offer(self, enqueued_through: int) -> None:
        """The state now waits for the flush past the copies it counts, then for the checkpoint to
        count the entries before ``enqueued_through`` enqueued (every record it delivered)."""
        self.gate.offer(self.stored_end, self.mark(enqueued_through))

    def on_flushed(self, flushed_end: int) -> None:
        """Write the newest state the flushed end and the checkpoint's enqueue mark cover into the
        checkpoint's mapping."""
        self.gate.on_flushed(flushed_end)
        flushed = self.gate.take()
        if flushed is not None:
            self.enqueue_gate.offer(flushed.enqueued_through, flushed)
        self.enqueue_gate.on_flushed(self.checkpoint.next_queue_offset)
        mark = self.enqueue_gate.take()
        if mark is not None:
            cp = self.checkpoint
            cp.last_read_ms, cp.delivered_slot_ms = mark.last_read_ms, mark.delivered_slot_ms
            cp.delivered_pos, cp.in_flight_phys = mark.delivered_pos, mark.in_flight_phys
