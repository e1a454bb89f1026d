"""A packed reply's fields: the records as stored, back to back, and their columns."""

from __future__ import annotations

from mqstore.engine.read.lookup import StoredRecords
from mqstore.ipc.wire.messages import pack_columns

NONE_STORED = StoredRecords(b"", [], [], [])


def packed(stored: StoredRecords) -> tuple[int, bytes, bytes]:
    """A packed reply's ``count``, ``cols`` and records (``mqstore.ipc.wire.messages.stored_parts``' fields)."""
    return len(stored.sizes), pack_columns(stored.queue_offsets, stored.phys_offsets, stored.sizes), stored.data
