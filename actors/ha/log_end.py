"""Where a slave's commitlog ends, found as the writer finds it: the records checked with their
CRCs from where the consume queues stop covering the log, and a torn tail (a transfer cut short, an
append killed) cut. The bytes past it come again from the master."""

from __future__ import annotations

import logging
from pathlib import Path

from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.ha.replica import complete_end, recover_replica
from mqstore.engine.log.commitlog import CommitLog

log = logging.getLogger("mqstore")


def recover_end(store_dir: Path, commitlog: CommitLog, cq_entries_per_file: int, *,
                cut: bool = True) -> tuple[int, int]:
    """Where the consume queues stop covering the log, and the log's end (cut there with ``cut``)."""
    queues = ConsumeQueueStore.open(store_dir / "consumequeue", cq_entries_per_file, writable=False)
    try:
        _, covered = queues.published_state()
    finally:
        queues.close()
    if not commitlog.queue.files:
        return 0, 0
    start = max(covered, commitlog.min_offset)
    if not cut:
        return start, complete_end(commitlog, start, commitlog.max_offset, check_crc=True)
    end = recover_replica(commitlog, start)
    log.info("commitlog ends at %d", end)
    return start, end
