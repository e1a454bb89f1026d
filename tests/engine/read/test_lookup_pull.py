"""A pull's pass over consume-queue entries (``get_messages``, the kernel ``pull_records`` keeping what the
tag filter and the limits let through and reading their records) held to the per-entry loop it replaced
(``tests/oracle/lookup.py``): the same status, next offset, records or stored bytes and filtered count,
over entries that point at records, inside them, past the log's end or past what is readable, with wrong
sizes and with tags whose codes collide ("Aa" and "BB" share Java's hash); over a store of small files,
across their boundaries and over records whose size, magic, topic or TAGS bytes are broken."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.consumequeue.entry import CQ_DTYPE, CqEntries
from mqstore.engine.java.jhash import tags_code
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import body_length_pos, decode_record, encode_record
from mqstore.engine.read.lookup import PullLimits, TagFilter, get_messages
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


# Java's String.hashCode gives "Aa" and "BB" one tags code (31 * 'A' + 'a' == 31 * 'B' + 'B'): a pull filtering
# on one keeps the other's entries, and only the record's TAGS tells them apart
STORE_TAGS = ["Aa", "BB", "TagA", "Tëg", "XY", "XYZ", None]
# a record's TAGS bytes that are not UTF-8: decode_properties reads them with U+FFFD in place of each bad run
NOT_UTF8 = {"XY": b"\xe0\x80", "XYZ": b"\xf0\x90\x80"}


def _damaged(record: bytearray, tag: str | None, damage: str) -> bytearray:
    """The encoded record with one field broken as ``damage`` says (written so, as a torn or stray write)."""
    topic_len_pos = body_length_pos(0) + 4 + int.from_bytes(record[body_length_pos(0):body_length_pos(0) + 4], "big")
    if damage == "magic":
        record[4:8] = b"\x00\x00\x00\x01"
    elif damage == "size":
        record[0:4] = (len(record) + 1).to_bytes(4, "big")
    elif damage == "topic_len":
        record[topic_len_pos] = 200  # a negative length as a v1 record reads it
    elif damage == "topic_utf8":
        record[topic_len_pos + 1] = 0xFF
    if tag in NOT_UTF8:
        at = record.rindex(b"TAGS\x01") + 5
        record[at:at + len(tag)] = NOT_UTF8[tag].ljust(len(tag), b"Z")
    return record


@pytest.fixture(scope="module")
def store_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CommitLog, list[tuple[int, int, int]]]]:
    """150 records of random sizes and tags over 4 KiB commitlog files, a few of them broken: (phys offset,
    size, tags code as the dispatch would have it) of each."""
    commitlog = CommitLog.open(tmp_path_factory.mktemp("store"), 4096)
    rng = random.Random(14)
    found = []
    for i in range(150):
        tag = rng.choice(STORE_TAGS)
        damage = rng.choice(["none"] * 12 + ["magic", "size", "topic_len", "topic_utf8"])
        record = _damaged(encode_record(topic="T", body=bytes(rng.randrange(0, 300)), properties={"TAGS": tag}
                                        if tag else {}, born_host=V4, store_host=V4), tag, damage)
        decoded = decode_record(bytes(record), check_crc=False).record
        tags = decoded.tags if decoded is not None else tag
        (phys,) = commitlog.append(record, [len(record)], [i], 1_700_000_000_000)
        found.append((phys, len(record), tags_code(tags) if tags else 0))
    assert len(commitlog.queue.files) > 5
    yield commitlog, found
    commitlog.close()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), expression=st.sampled_from(["*", "Aa", "BB", "TagA || Aa", "Tëg", "\ufffd\ufffd", "\ufffd",
                                                   "\ud800 || BB", "Nope", "XY || XYZ"]),
       max_count=st.integers(0, 64), max_bytes=st.sampled_from([1, 3000, 1 << 20, 1 << 20]), stored=st.booleans())
def test_a_pull_over_a_store_answers_what_the_per_record_loop_answers(
        store_log: tuple[CommitLog, list[tuple[int, int, int]]], data: st.DataObject, expression: str, max_count: int,
        max_bytes: int, stored: bool) -> None:
    """Pulls across commitlog files, over records whose size, magic, topic or TAGS bytes are broken, entries
    that point elsewhere, and a readable end anywhere: what the kernel answers is what the loop did."""
    commitlog, records = store_log
    first = data.draw(st.integers(0, len(records) - 1))
    rows = []
    for phys, size, code in records[first:first + data.draw(st.integers(1, 80))]:
        damage = data.draw(st.sampled_from(["none"] * 8 + ["size", "inside", "past", "code", "negative"]))
        if damage == "size":
            size += data.draw(st.sampled_from([-1, 1, 50]))
        elif damage == "inside":
            phys += data.draw(st.integers(1, 20))
        elif damage == "past":
            phys = commitlog.max_offset + data.draw(st.integers(0, 5000))
        elif damage == "negative":
            phys = -data.draw(st.integers(1, 100))
        elif damage == "code":
            code = data.draw(st.sampled_from([0, tags_code("TagA"), 12345]))
        rows.append((phys, size, code))
    view = Entries(np.array(rows, dtype=CQ_DTYPE))
    queue_offset = data.draw(st.integers(0, min(len(rows) - 1, 3)) | st.integers(0, len(rows) - 1))
    cut = data.draw(st.sampled_from(records))[0]
    end = commitlog.max_offset
    readable_end = data.draw(st.sampled_from([end, end, end, end + 10_000, cut, cut + 5]))
    limits = PullLimits(max_count=max_count, max_bytes=max_bytes, transfer_count=data.draw(st.integers(1, 64)))
    tag_filter = TagFilter.parse(expression)
    got = get_messages(view, commitlog, queue_offset, limits, tag_filter, readable_end, stored=stored)
    want = oracle.get_messages(view, commitlog, queue_offset, limits, tag_filter, readable_end, stored=stored)
    assert got == want


def _pull_records(entries: object, first_row: int = 0, data: bytes = b"", file_end: int = 0, written_pos: int = 0,
                  tag_ends: object = None) -> object:
    return _native.pull_records(entries, np.zeros(0, np.int64), 100, 2, 100, 0, 0, first_row, 0, data, 0, file_end,
                                written_pos, 2, b"Aa", np.array([2], np.int64) if tag_ends is None else tag_ends)


def test_bad_arguments_are_refused() -> None:
    rows = np.zeros(2, CQ_DTYPE)
    with pytest.raises(ValueError, match="whole"):
        _pull_records(rows.tobytes()[:-1])
    with pytest.raises(ValueError, match="first row"):
        _pull_records(rows, first_row=3)
    with pytest.raises(ValueError, match="cannot span"):
        _pull_records(rows, data=bytes(10), file_end=10, written_pos=11)
    with pytest.raises(ValueError, match="cannot span"):
        _pull_records(rows, data=bytes(10), file_end=9)
    with pytest.raises(ValueError, match="tag 0"):
        _pull_records(rows, tag_ends=np.array([3], np.int64))
    with pytest.raises(ValueError, match="tag 1"):
        _pull_records(rows, tag_ends=np.array([2, 1], np.int64))
