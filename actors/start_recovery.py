"""What the supervisor does to a store before any actor starts: fix the geometry, let a slave's log
agree with its master's, and recover.

Recovery (``mqstore.engine.repair.recovery``) after an abnormal stop first repairs what a crash can
leave (``repair_crash_files``); then, before the writer reuses the offsets of a lost tail, no group's
committed offset stays past its queue's recovered end, no ack-mode group's index holds the lost
messages, and no reader's low-water mark names them (the readers start later).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from mqstore.actors.clock import wall_ms
from mqstore.actors.config import BrokerConfig
from mqstore.actors.ha.rejoin import rejoin
from mqstore.engine.ackindex.low_water import clamp_marks
from mqstore.engine.ackindex.truncation import truncate_to_queue_ends
from mqstore.engine.config import resolve_geometry
from mqstore.engine.consumequeue.store import ConsumeQueueStore
from mqstore.engine.delay.table import save_delay_levels
from mqstore.engine.ha.promotion import check_start_role
from mqstore.engine.keyindex.service import IndexService
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.meta.checkpoint import Checkpoint
from mqstore.engine.meta.metafile import abort_exists
from mqstore.engine.meta.offsets import clamp_to_queue_ends
from mqstore.engine.repair.crash_files import repair_crash_files
from mqstore.engine.repair.recovery import recover

log = logging.getLogger("mqstore")


def recover_at_start(config: BrokerConfig) -> tuple[BrokerConfig, dict[str, Any]]:
    """The configuration with the store's geometry, and what recovery found."""
    store_dir = Path(config.store_dir)
    wanted = config.store.geometry if config.geometry_given else None
    geometry = resolve_geometry(store_dir, wanted)
    config = replace(config, store=replace(config.store, geometry=geometry))
    check_start_role(store_dir, config.is_slave)  # a promoted store never starts as a slave by mistake
    if config.is_slave:
        rejoin(config)  # a log its master's epochs say diverged is cut, and recovered as after a crash
    abnormal = abort_exists(store_dir)
    checkpoint = Checkpoint.open(store_dir / "checkpoint")
    try:
        crash = repair_crash_files(store_dir, geometry, checkpoint.physic_msg_ms) if abnormal else None
    except BaseException:
        checkpoint.close()
        raise
    for note in crash.notes if crash is not None else ():
        log.warning("after the abnormal stop: %s", note)
    commitlog = CommitLog.open(store_dir / "commitlog", geometry.commitlog_file_size)
    queues = ConsumeQueueStore.open(store_dir / "consumequeue", geometry.cq_entries_per_file)
    index = IndexService.open(store_dir / "index", geometry.index_slot_count, geometry.index_entry_count,
                              wall_ms) if config.store.index_enabled else None
    try:
        result = recover(commitlog, queues, index, checkpoint, abnormal=abnormal,
                         check_crc=config.store.check_crc_on_recover, require_prop_crc=geometry.prop_crc,
                         levels=config.store.delay_levels,
                         cut_queues=crash.cut_queues if crash is not None else ())
        save_delay_levels(store_dir, config.store.delay_levels)  # what offline tools read
        # before the writer reuses the offsets of a lost tail: no group stays past its queue's end,
        # and no ack-mode group's index holds the lost messages (its readers start later)
        queue_ends = {(cq.topic, cq.queue_id): cq.max_queue_offset for cq in queues}
        for key, queue_id, was, now in clamp_to_queue_ends(store_dir, queue_ends, wall_ms):
            log.warning("consumer offset of %s queue %d was %d, past the recovered end: now %d",
                        key, queue_id, was, now)
        for (group, topic, queue_id), cut in truncate_to_queue_ends(store_dir, queue_ends):
            log.warning("ack index of %s on %s queue %d held up to %d, past the recovered end: cut back to %d",
                        group, topic, queue_id, cut.indexed_end, cut.end_seq_id)
        for reader in clamp_marks(store_dir, queue_ends, commitlog.max_offset):
            log.warning("reader %d's low-water mark named offsets past the recovered end: brought back", reader)
        commitlog.queue.flush_all()
        queues.flush(0)
        if index is not None:
            index.flush()
    finally:
        commitlog.close()
        queues.close()
        if index is not None:
            index.close()
        checkpoint.close()
    summary = {"abnormal": result.abnormal, "end": result.end_phys_offset, "truncated_bytes": result.truncated_bytes,
               "stop_reason": result.stop_reason, "redispatched": result.cq_redispatched}
    log.info("recovered %s: %s", store_dir, summary)
    return config, summary
