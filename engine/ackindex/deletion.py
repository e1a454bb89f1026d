"""Deleting an ack-mode group's queue indexes (``mqstore groups delete``): each
``queueindex/{group}/{topic}/{queue}/`` goes durably, or not at all.

A queue's directory is first renamed to ``.deleted-{queue}`` beside it (``queue_index_keys`` reads
only queue directories named by a number, so from that rename on no reader opens it and no mark
counts it) and the rename made durable; then it is removed, and the topic's and the group's
directories with it once empty, each removal synced in its parent. A crash midway leaves a
``.deleted-`` directory that the next deletion of the group removes, never half an index.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from mqstore.engine.ackindex.low_water import QUEUE_INDEX_DIR, AckKey, queue_index_keys
from mqstore.engine.meta.metafile import fsync_dir

DELETED_PREFIX = ".deleted-"


def group_queue_keys(store_dir: Path, group: str) -> list[AckKey]:
    """Every queue ``group`` has an index for."""
    return [key for key in queue_index_keys(store_dir) if key[0] == group]


def delete_queue_index(store_dir: Path, key: AckKey) -> bool:
    """Remove one queue's index (it must be closed); whether it was there."""
    group, topic, queue_id = key
    topic_dir = store_dir / QUEUE_INDEX_DIR / group / topic
    directory = topic_dir / str(queue_id)
    if not directory.is_dir():
        return False
    deleted = topic_dir / f"{DELETED_PREFIX}{queue_id}"
    if deleted.exists():
        shutil.rmtree(deleted)  # the same queue's removal cut short before
    directory.rename(deleted)
    fsync_dir(topic_dir)
    shutil.rmtree(deleted)
    fsync_dir(topic_dir)
    return True


def remove_empty_group_dirs(store_dir: Path, group: str) -> None:
    """The group's directories once no queue index is left in them (leftovers of cut-short removals
    go too)."""
    group_dir = store_dir / QUEUE_INDEX_DIR / group
    if not group_dir.is_dir():
        return
    for topic_dir in sorted(p for p in group_dir.iterdir() if p.is_dir()):
        for leftover in topic_dir.glob(f"{DELETED_PREFIX}*"):
            shutil.rmtree(leftover)
        _remove_if_empty(topic_dir)
    _remove_if_empty(group_dir)


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return  # not empty: a queue of it is still indexed (another reader's, or one being made)
        raise  # anything else (EIO, EACCES) is the deletion failing, said to the caller
    fsync_dir(directory.parent)
