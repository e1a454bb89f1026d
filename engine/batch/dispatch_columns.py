"""DispatchRequests of many records at once, as columns decoded from ``RecordColumns``: what re-dispatch
hands the consume queues (``DISPATCH_COLUMNS`` rows and their topic table) and the index (each key's
row and hash), without a Python object per record.

One kernel call reads every record's topic and properties off the buffer
(``mqstore.engine._native.dispatch_keys``): TAGS, KEYS and UNIQ_KEY with ``decode_properties``' rules (a
segment counts when its name and value are non-empty, a later one replaces an earlier one), the tags
code and the index keys hashed as ``topic#key``. A record whose topic or those values are not ASCII
(Java hashes UTF-16 units of the decoded text), or a delayed message (whose tags code is its
delivery time), goes through ``decode_record`` and ``DispatchRequest.from_record`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mqstore.engine import _native
from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS, DispatchRequest
from mqstore.engine.batch.record_columns import RecordColumns
from mqstore.engine.delay.table import DEFAULT_DELAY_LEVELS, DelayLevels
from mqstore.engine.keyindex.keys import key_hashes, record_keys
from mqstore.engine.log.record import SCHEDULE_TOPIC, DecodeKind, decode_record

Array = npt.NDArray[Any]
_SCHEDULE = SCHEDULE_TOPIC.encode()
_KEYS_PER_RECORD = 2  # room for a UNIQ_KEY and one KEYS token each; more makes a second call


@dataclass(frozen=True, slots=True)
class DispatchColumns:
    """``rows`` (``DISPATCH_COLUMNS``, one per record, in commitlog order) with ``topics`` (what their
    ``topic`` column indexes), and the index keys: ``key_rows`` (ascending; a record's UNIQ_KEY
    first, then its KEYS) and ``key_hashes`` (``index_hash`` of ``topic#key``)."""

    rows: Array
    topics: list[str]
    key_rows: Array
    key_hashes: Array

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def of(cls, buf: Array, records: RecordColumns, levels: DelayLevels = DEFAULT_DELAY_LEVELS) -> DispatchColumns:
        """The dispatch columns of ``records`` (all valid) in ``buf``; ``levels``: the store's delay table."""
        n = len(records)
        rows = np.zeros(n, dtype=DISPATCH_COLUMNS)
        for name in ("phys_offset", "size", "queue_id", "queue_offset", "store_ms", "sys_flag"):
            rows[name] = getattr(records, name)
        codes, firsts, tags_code, exact = (np.empty(n, np.int64) for _ in range(4))
        topic_pos, topic_len, props_pos, props_len = (np.ascontiguousarray(column, np.int64) for column in (
            records.topic_pos, records.topic_len, records.props_pos, records.props_len))
        capacity = _KEYS_PER_RECORD * n
        while True:
            key_rows, hashes = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
            topic_count, key_count = _native.dispatch_keys(buf, topic_pos, topic_len, props_pos, props_len, _SCHEDULE,
                                                           codes, firsts, tags_code, exact, key_rows, hashes)
            if key_count <= capacity:
                break
            capacity = key_count
        key_rows, hashes = key_rows[:key_count], hashes[:key_count]
        mv = memoryview(buf)  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
        topics = [bytes(mv[p:p + length]).decode("ascii") for p, length in
                  zip(topic_pos[firsts[:topic_count]].tolist(), topic_len[firsts[:topic_count]].tolist(), strict=True)]
        table = {name: code for code, name in enumerate(topics)}
        exact_rows: list[int] = []
        exact_hashes: list[Array] = []
        for i in np.flatnonzero(exact).tolist():
            request = _exact_request(mv, int(records.starts[i]), levels)
            codes[i] = table.setdefault(request.topic, len(table))
            tags_code[i] = request.tags_code
            names = record_keys(request.uniq_key, request.keys)
            exact_rows += [i] * len(names)
            exact_hashes.append(key_hashes(request.topic, names))
        if exact_rows:  # each record's keys come from one side: a stable sort by row interleaves them
            key_rows = np.concatenate((key_rows, np.asarray(exact_rows, np.int64)))
            order = np.argsort(key_rows, kind="stable")
            key_rows, hashes = key_rows[order], np.concatenate((hashes, *exact_hashes))[order]
        rows["topic"] = codes
        rows["tags_code"] = tags_code
        return cls(rows, list(table), key_rows, hashes)

    def index_keys(self) -> tuple[Array, Array]:
        return self.key_rows, self.key_hashes

    def since(self, phys_offset: int) -> DispatchColumns:
        """The records whose phys offset is at or after ``phys_offset``."""
        keep = self.rows["phys_offset"] >= phys_offset
        if bool(keep.all()):
            return self
        renumber = np.cumsum(keep) - 1
        key_keep = keep[self.key_rows]
        return DispatchColumns(self.rows[keep], self.topics, renumber[self.key_rows[key_keep]],
                               self.key_hashes[key_keep])


def _exact_request(mv: memoryview, start: int, levels: DelayLevels) -> DispatchRequest:
    decoded = decode_record(mv, start, check_crc=False, read_body=False)
    if decoded.kind is not DecodeKind.RECORD or decoded.record is None:
        raise ValueError(f"record at {start} no longer decodes: {decoded.reason}")
    return DispatchRequest.from_record(decoded.record, levels)
