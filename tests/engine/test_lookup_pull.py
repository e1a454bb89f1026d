"""A pull's pass over consume-queue entries (``get_messages``, the kernel ``pull_rows`` keeping what the tag
filter and the limits let through) held to the per-entry loop it replaced (``tests/oracle/lookup.py``):
the same status, next offset, records or stored bytes and filtered count, over entries that point at
records, inside them, past the log's end or past what is readable, with wrong sizes and with tags
whose codes collide ("Aa" and "BB" share Java's hash)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import _native
from engine.consumequeue.consume_queue import CQ_DTYPE, CqEntries
from engine.jhash import tags_code
from engine.log.commitlog import CommitLog
from engine.log.host import Host
from engine.log.record import encode_record
from engine.lookup import PullLimits, TagFilter, get_messages
from tests.oracle import lookup as oracle

TAGS = ["Aa", "BB", "TagA", "TagB", None]
V4 = Host("10.0.0.7", 4000)
assert tags_code("Aa") == tags_code("BB")


@dataclass
class Entries:
    """A queue view over given entries: what ``get_messages`` reads of a consume queue."""

    rows: CqEntries
    min_queue_offset: int = 0
    entries_per_file: int = 64

    @property
    def max_queue_offset(self) -> int:
        return len(self.rows)

    def read(self, queue_offset: int, max_count: int) -> CqEntries:
        return self.rows[queue_offset:queue_offset + max_count].copy()


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CommitLog, list[tuple[int, int, int]]]]:
    """Twenty records with each tag in turn: (phys offset, size, tags code) of each."""
    commitlog = CommitLog.open(tmp_path_factory.mktemp("log"), 1 << 16)
    found = []
    for i in range(20):
        tag = TAGS[i % len(TAGS)]
        record = encode_record(topic="T", body=bytes(10 + i), properties={"TAGS": tag} if tag else {},
                               born_host=V4, store_host=V4)
        (phys,) = commitlog.append(record, [len(record)], [i], 1_700_000_000_000)
        found.append((phys, len(record), tags_code(tag) if tag else 0))
    yield commitlog, found
    commitlog.close()


@st.composite
def entries(draw: st.DrawFn, records: list[tuple[int, int, int]], end: int) -> CqEntries:
    """Entries for the records in order, each now and then pointing elsewhere or sized wrong."""
    rows = []
    for phys, size, code in records[draw(st.integers(0, 10)):draw(st.integers(10, 20))]:
        damage = draw(st.sampled_from(["none"] * 6 + ["size", "inside", "past", "code"]))
        if damage == "size":
            size += draw(st.sampled_from([-1, 1, 50]))
        elif damage == "inside":
            phys += draw(st.integers(1, 20))
        elif damage == "past":
            phys = end + draw(st.integers(0, 100))
        elif damage == "code":
            code = draw(st.sampled_from([0, tags_code("TagA"), 12345]))
        rows.append((phys, size, code))
    return np.array(rows, dtype=CQ_DTYPE)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), expression=st.sampled_from(["*", "Aa", "BB", "TagA || Aa", "Nope", "TagB||TagA||BB"]),
       max_count=st.integers(0, 6), max_bytes=st.sampled_from([1, 100, 300, 1 << 20]), stored=st.booleans())
def test_a_pull_answers_what_the_per_entry_loop_answers(log: tuple[CommitLog, list[tuple[int, int, int]]],
                                                        data: st.DataObject, expression: str, max_count: int,
                                                        max_bytes: int, stored: bool) -> None:
    commitlog, records = log
    view = Entries(data.draw(entries(records, commitlog.max_offset)))
    if not len(view.rows):
        return
    queue_offset = data.draw(st.integers(0, len(view.rows) - 1))
    readable_end = data.draw(st.sampled_from([commitlog.max_offset, records[12][0], records[12][0] + 5]))
    limits = PullLimits(max_count=max_count, max_bytes=max_bytes, transfer_count=data.draw(st.integers(1, 6)))
    tag_filter = TagFilter.parse(expression)
    got = get_messages(view, commitlog, queue_offset, limits, tag_filter, readable_end, stored=stored)
    want = oracle.get_messages(view, commitlog, queue_offset, limits, tag_filter, readable_end, stored=stored)
    assert got == want


def test_bad_arguments_are_refused() -> None:
    rows = np.zeros(2, CQ_DTYPE)
    codes = np.zeros(0, np.int64)
    with pytest.raises(ValueError, match="whole"):
        _native.pull_rows(rows.tobytes()[:-1], codes, 100, 2, 100, 0, 0, 0, np.empty(2, np.int64))
    with pytest.raises(ValueError, match="first row"):
        _native.pull_rows(rows, codes, 100, 2, 100, 0, 0, 3, np.empty(2, np.int64))
    with pytest.raises(ValueError, match="room"):
        _native.pull_rows(rows, codes, 100, 4, 100, 0, 0, 0, np.empty(2, np.int64))
