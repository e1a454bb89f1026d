"""Where moved messages are now, as one reader learns it from the moved topic's consume queue.

The writer moves the unacked messages that alone hold an old commitlog file by appending copies on
``mqstore.engine.reclaim.move.MOVED_TOPIC`` (each naming its original's offset in ``MOVED_FROM``); a queue
index keeps the original's offset in its msg ids. ``MovedCopies.latest`` maps each original offset
to its newest copy (a message moved twice is named by its first offset in both copies), and the
reader's ack-mode queues read a moved message there (``mqstore.actors.reader.ack_queue``).

Nothing here is written: the moved topic's consume queue is the durable record of every move, and a
restarted reader reads it from its first live entry before it serves anything. A copy is trusted
only when the message it copies, where it was last known, is still there and is the same message
(``mqstore.engine.reclaim.move.same_message``), or is gone (acked, or moved before this reader started and
read from here in order): a record a producer put on the moved topic cannot stand in for another
message. A copy appended by a writer killed before it dispatched it is read once the consume-queue
builder has caught up: until then its original is still where it was, since only a mark counting
the copy lets the file go.
"""

from __future__ import annotations

import logging

from mqstore.actors.reader.state import PublishedStore
from mqstore.engine.consumequeue.entry import entry_holds_message
from mqstore.engine.log.record import Record
from mqstore.engine.reclaim.move import MOVED_QUEUE_ID, MOVED_TOPIC, origin_of, same_message

log = logging.getLogger("mqstore")

READ_ENTRIES = 1024  # moved-topic entries read at once

Location = tuple[int, int]  # (commitlog offset, size)


class MovedCopies:
    def __init__(self) -> None:
        self.latest: dict[int, Location] = {}  # original's commitlog offset -> its newest copy
        self._original: dict[int, int] = {}     # a copy's commitlog offset -> its original's
        self.next_queue_offset = 0              # the moved topic's next entry to read
        self.copies_read = 0

    def refresh(self, store: PublishedStore) -> dict[int, Location]:
        """Read the copies appended since the last call; returns the moves they make, each earlier
        location of a message (its original, an older copy) -> its new copy."""
        store.recheck(MOVED_TOPIC, MOVED_QUEUE_ID)
        view = store.published_queue(MOVED_TOPIC, MOVED_QUEUE_ID)
        if view is None:
            return {}
        moves: dict[int, Location] = {}
        queue_offset = max(self.next_queue_offset, view.min_queue_offset)
        while queue_offset < view.max_queue_offset:
            entries = view.read(queue_offset, READ_ENTRIES)
            if len(entries) == 0:
                break
            for phys_offset, size, _ in entries.tolist():
                record = store.record_at(phys_offset, size) if entry_holds_message(phys_offset, size) else None
                origin = origin_of(record) if record is not None else None
                if record is None or origin is None:
                    continue
                self.copies_read += 1
                old = self.latest.get(origin.phys_offset)
                if old is not None and old[0] >= phys_offset:
                    continue
                earlier = old if old is not None else (origin.phys_offset, origin.size)
                if earlier[0] >= store.commitlog.min_offset and not _copies(store, earlier, record):
                    log.warning("moved topic: the record at %d is no copy of the message at %d; ignored",
                                phys_offset, earlier[0])
                    continue
                self.latest[origin.phys_offset] = moves[origin.phys_offset] = (phys_offset, size)
                self._original[phys_offset] = origin.phys_offset
                if old is not None:
                    moves[old[0]] = (phys_offset, size)
            queue_offset += len(entries)
        self.next_queue_offset = queue_offset
        self._forget_below(store.commitlog.min_offset)
        return moves

    def where(self, phys_offset: int) -> Location | None:
        """The newest copy of the message stored at ``phys_offset`` (its original, or a copy); None
        when none is known."""
        return self.latest.get(self._original.get(phys_offset, phys_offset))

    def _forget_below(self, commitlog_min: int) -> None:
        """A copy retention took was acked, or moved again (its newer copy replaced it here)."""
        for origin in [origin for origin, loc in self.latest.items() if loc[0] < commitlog_min]:
            del self.latest[origin]  # in place: the queues read this very map
        for copy in [copy for copy in self._original if copy < commitlog_min]:
            del self._original[copy]


def _copies(store: PublishedStore, earlier: Location, record: Record) -> bool:
    before = store.record_at(*earlier)
    return before is not None and same_message(before, record)
