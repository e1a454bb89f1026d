"""A master's metadata applied on its slave, where no writer, scheduler or timer runs: so that a
promoted slave resumes every group, delay level and timer within one sync of where its master was,
at least once and never past what it holds.

- topics: ``config/topics.json`` replaced (``write_atomic``) when the master's data version is not
  the one the file holds;
- consumer offsets: handed to reader 0, their owner, as ``merge_offsets``: an offset moves forward
  only, and no further than the slave's queue end (the rest at a later sync, once the log caught up);
- delay offsets: ``config/delayOffset.json`` replaced with the master's table when it differs; a
  promoted scheduler resumes from it and may deliver again what the master delivered since (at
  least once);
- the timer checkpoint: ``config/timercheck`` written whole (``write_atomic``) with the master's read
  time, masterTimerQueueOffset and data version, as RocketMQ's slave copies them, and with nothing
  enqueued here (``next_queue_offset`` 0: the slave's timerlog is empty). A promoted timer actor then
  walks the timer queue from its first entry, and its recovery reads the commitlog from that entry's
  record for the copies the master already delivered (``TIMER_FROM_PHYS_OFFSET``), which it does not
  deliver again (``mqstore.actors.timer.actor``): no timer lost, none delivered twice that the slave's
  log shows delivered.
- ack marks: each ack-mode queue's ``acked_below`` handed to the reader that owns its index, as
  ``merge_ack_marks``: everything below the mark acked in the slave's index (durably, the journal
  first), forward only and no further than the slave's queue end, so a promoted slave hands the
  group out from the mark (at least once: the master's mark lags its acks by a sync).
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

from mqstore.actors.metasync.fetch import TimerProgress
from mqstore.engine.delay.offsets import DelayOffsets, read_delay_offsets, write_delay_offsets
from mqstore.engine.meta.data_version import DataVersion
from mqstore.engine.meta.metafile import write_atomic
from mqstore.engine.meta.topics import TopicConfig, read_topic_file, write_topic_file
from mqstore.engine.timer.checkpoint import CHECKPOINT_FILE, CHECKPOINT_SIZE

log = logging.getLogger("mqstore")

_TIMER_HEAD = struct.Struct(">7q")   # RocketMQ's fields (``mqstore.engine.timer.checkpoint``)
_TIMER_OWN = struct.Struct(">3q")    # mqstore's, at 64: delivered_slot_ms, delivered_pos, in_flight_phys
_TIMER_OWN_POS = 64


def apply_topics(store_dir: Path, topics: dict[str, TopicConfig], version: DataVersion) -> bool:
    """Replace the slave's topics with the master's when the version differs; whether it did."""
    current = read_topic_file(store_dir)
    if current is not None and current[1] == version and current[0] == topics:
        return False
    write_topic_file(store_dir, topics, version)
    return True


def apply_delay_offsets(store_dir: Path, master: DelayOffsets, now_ms: int) -> bool:
    """Write the master's delay offsets when they differ from the slave's; whether it did."""
    if read_delay_offsets(store_dir) == master:
        return False
    write_delay_offsets(store_dir, master.offsets, master.counter, now_ms)
    return True


def timer_checkpoint_bytes(master: TimerProgress) -> bytes:
    """The slave's ``config/timercheck`` for the master's progress (see the module's note)."""
    data = bytearray(CHECKPOINT_SIZE)
    v = master.version
    _TIMER_HEAD.pack_into(data, 0, master.last_read_ms, 0, 0, master.master_queue_offset, v.state_version,
                          v.timestamp_ms, v.counter)
    _TIMER_OWN.pack_into(data, _TIMER_OWN_POS, -1, -1, -1)
    return bytes(data)


def apply_timer_checkpoint(store_dir: Path, master: TimerProgress) -> bool:
    """Write the slave's timer checkpoint when the master's progress moved; whether it did."""
    path = store_dir / CHECKPOINT_FILE
    data = timer_checkpoint_bytes(master)
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, data, keep_backup=False)  # its reader maps the file itself and never reads a backup
    return True
