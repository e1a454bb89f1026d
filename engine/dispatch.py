"""DispatchRequest: what a derived file needs to know about one commitlog record.

The commitlog is the truth and a DispatchRequest is a hint derived from it: a consume-queue or
index builder that misses some can always rebuild them by decoding the commitlog again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from engine.record import SYSFLAG_TX_COMMIT, SYSFLAG_TX_MASK, Record


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    phys_offset: int
    size: int
    tags_code: int
    store_ms: int
    queue_offset: int
    keys: tuple[str, ...]
    uniq_key: str | None
    sys_flag: int

    @classmethod
    def from_record(cls, record: Record) -> DispatchRequest:
        return cls(record.topic, record.queue_id, record.phys_offset, record.size, record.tags_code,
                   record.store_ms, record.queue_offset, tuple(record.keys), record.uniq_key, record.sys_flag)

    @property
    def has_queue_entry(self) -> bool:
        """Prepared and rolled-back transaction records get no consume-queue entry."""
        return self.sys_flag & SYSFLAG_TX_MASK in (0, SYSFLAG_TX_COMMIT)


class Dispatcher(Protocol):
    def dispatch(self, request: DispatchRequest) -> None: ...
