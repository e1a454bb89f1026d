"""A key query's candidates compared with their keys in their stored bytes (``mqstore.engine._native.keys_holding``,
one kernel call for every key's candidates in every commitlog file) held to the Python comparison of one
key it replaced (``tests/oracle/lookup.py`` ``matching``), key by key: the same records found for any candidate offsets
(record starts, inside records, past the readable end, below the log's start, twice) over records of
both magics and host families whose KEYS and UNIQ_KEY hold the key, hold it as part of a word, or not
at all, and over bytes damaged anywhere (lengths that point past a record, negative ones); and what
the query's kernels refuse."""

from __future__ import annotations

import tempfile
from array import array
from itertools import accumulate
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.log.commitlog import CommitLog
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import SYSFLAG_POS, body_length_pos, decode_record, encode_record
from mqstore.engine.read.lookup import _LOG_END, KEYS_PREFIX, TAKEN_COLUMNS, UNIQ_KEY_PREFIX
from tests.oracle import lookup as oracle

V4, V6 = Host("10.0.0.7", 4000), Host("2001:db8::1", 10911)
WORDS = ["k1", "k2", "k", "", "k1k1"]
FILE_SIZE = 4096

values = st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join)


@st.composite
def record_specs(draw: st.DrawFn) -> dict[str, object]:
    props = {}
    if draw(st.booleans()):
        props["KEYS"] = draw(values)
    if draw(st.booleans()):
        props["UNIQ_KEY"] = draw(st.sampled_from(WORDS))
    if draw(st.booleans()):
        props["xKEYS"] = draw(values)  # a name that ends like the one looked for
    return {"topic": draw(st.sampled_from(["T", "U", "t" * 130])), "body": b"b" * draw(st.integers(0, 40)),
            "properties": props, "born_host": draw(st.sampled_from([V4, V6])),
            "store_host": draw(st.sampled_from([V4, V6]))}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_specs(), min_size=1, max_size=25), st.lists(st.tuples(st.integers(0, 1 << 14),
                                                                             st.integers(1, 255)), max_size=3),
       st.data(), st.sampled_from(["T", "t" * 130, "U"]), st.booleans())
def test_candidates_hold_their_keys_as_the_python_comparison_says(specs: list[dict[str, object]],
                                                                  flips: list[tuple[int, int]], data: st.DataObject,
                                                                  topic: str, uniq: bool) -> None:
    with tempfile.TemporaryDirectory() as work:
        log = CommitLog.open(Path(work), FILE_SIZE)
        try:
            starts = []
            for spec in specs:
                record = encode_record(**spec)  # type: ignore[arg-type]
                starts += log.append(record, [len(record)], [0], 1_700_000_000_000)
            for at, value in flips:
                mf = log.queue.find(at % log.max_offset)
                if mf is not None:
                    mf.buffer[at % log.max_offset - mf.file_base] ^= value
            elsewhere = st.integers(-5, log.max_offset + 50)
            candidates = data.draw(st.lists(st.lists(st.sampled_from(starts) | elsewhere, max_size=6), max_size=4))
            keys = data.draw(st.lists(st.sampled_from(WORDS), min_size=len(candidates), max_size=len(candidates)))
            ends_of_records = [*starts[1:], log.max_offset]
            end = data.draw(st.sampled_from([log.max_offset, starts[len(starts) // 2] + 30,
                                             *(e - 1 for e in ends_of_records[-3:])]))
            got = _holding(log, candidates, topic.encode(), [k.encode() for k in keys], uniq, end)
            assert got == [oracle.matching(log, c, topic.encode(), k.encode(), uniq, end)
                           for c, k in zip(candidates, keys, strict=True)]
        finally:
            log.close()


def _holding(log: CommitLog, candidates: list[list[int]], topic: bytes, keys: list[bytes], uniq: bool,
             end: int) -> list[list[tuple[int, bytes]]]:
    """Each key's records among its candidates, as ``keys_holding`` takes them (no cap): (phys offset,
    stored bytes), in the candidates' order."""
    files = log.queue.files
    cand_keys = array("q", [i for i, offsets in enumerate(candidates) for _ in offsets])
    cand_phys = array("q", [phys_offset for offsets in candidates for phys_offset in offsets])
    taken = np.empty((len(cand_phys), TAKEN_COLUMNS), np.int64)
    n_taken = _native.keys_holding([mf.buffer for mf in files], array("q", [mf.file_base for mf in files]),
                                   array("q", [min(end - mf.file_base, mf.written_pos) for mf in files]),
                                   log.min_offset, cand_keys, cand_phys, len(cand_phys), topic,
                                   UNIQ_KEY_PREFIX if uniq else KEYS_PREFIX, b"".join(keys),
                                   array("q", accumulate(map(len, keys))), uniq, 1 << 20,
                                   np.zeros(len(keys), np.int64), np.full(len(keys), _LOG_END, np.int64), taken, 0,
                                   np.zeros(len(keys), np.int64), 1, 1, np.zeros(len(keys), np.int64))[0]
    got: list[list[tuple[int, bytes]]] = [[] for _ in keys]
    for key, phys_offset, file, pos, size in taken[:n_taken].tolist():
        got[key].append((phys_offset, bytes(files[file].buffer[pos:pos + size])))
    return got


@pytest.mark.parametrize("topic", ["t" * 130, "T"])
def test_a_negative_topic_length_is_no_record_of_the_topic(tmp_path: Path, topic: str) -> None:
    """A record whose topic length field is negative (a signed short, or a byte over 127 for the first
    magic) is no record of any topic, as decode_record says: a length that, counted from the record's
    end as a Python slice would, lands on the topic's bytes once read before the record, here at the
    very start of the mapping."""
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        record = bytearray(encode_record(topic=topic, body=b"b", properties={"KEYS": "k"}, born_host=V4,
                                         store_host=V4))
        pos = body_length_pos(int.from_bytes(record[SYSFLAG_POS:SYSFLAG_POS + 4], "big", signed=True))
        pos += 4 + int.from_bytes(record[pos:pos + 4], "big")
        if len(topic) > 127:  # the second magic: a short, here the topic's length less the record's size
            record[pos:pos + 2] = (len(topic) - len(record)).to_bytes(2, "big", signed=True)
        else:  # the first: a byte, read signed
            record[pos] = 0x80 | len(topic)
        log.append(record, [len(record)], [0], 1_700_000_000_000)
        stored = bytes(log.queue.files[0].buffer[:len(record)])
        assert not oracle._holds(stored, topic.encode(), KEYS_PREFIX, b"k", True)
        assert _holding(log, [[0]], topic.encode(), [b"k"], False, len(record)) == [[]]
    finally:
        log.close()


def test_the_query_kernels_refuse_what_does_not_fit(tmp_path: Path) -> None:
    """A hostile or mistaken call raises ValueError with a reason, never reads or writes out of bounds."""
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        record = encode_record(topic="T", body=b"b", properties={"KEYS": "k"}, born_host=V4, store_host=V4)
        log.append(record, [len(record)], [0], 1_700_000_000_000)
        mf = log.queue.files[0]
        one = array("q", [0])
        big = array("q", [1 << 40])

        def holding(files: list[object], bases: array[int], limits: array[int], keys: array[int],
                    key_ends: array[int], taken: np.ndarray, n_taken: int = 0, wants: int = 1) -> tuple[int, int]:
            return _native.keys_holding(files, bases, limits, 0, keys, array("q", [0]), 1, b"T", KEYS_PREFIX, b"k",
                                        key_ends, False, 5, array("q", [0]), array("q", [_LOG_END]), taken, n_taken,
                                        array("q", [0]), 1, 2, array("q", [0] * wants))

        room = np.empty((1, TAKEN_COLUMNS), np.int64)
        assert holding([mf.buffer], one, array("q", [len(record)]), one, array("q", [1]), room) == (1, 1)
        with pytest.raises(ValueError, match="do not fit"):
            holding([mf.buffer], one, one, one, array("q", [1]), room, wants=2)
        with pytest.raises(ValueError, match="limit passes"):
            holding([mf.buffer], one, big, one, array("q", [1]), room)
        with pytest.raises(ValueError, match="not one of"):
            holding([mf.buffer], one, one, array("q", [3]), array("q", [1]), room)
        with pytest.raises(ValueError, match="out of the"):
            holding([mf.buffer], one, one, one, array("q", [2]), room)
        with pytest.raises(ValueError, match="no room"):
            holding([mf.buffer], one, array("q", [len(record)]), one, array("q", [1]), np.empty((0, TAKEN_COLUMNS),
                                                                                               np.int64))
        with pytest.raises(ValueError, match="list of one buffer"):
            holding([mf.buffer, mf.buffer], one, one, one, array("q", [1]), room)
        with pytest.raises(ValueError, match="do not fit"):
            holding([mf.buffer], one, one, one, array("q", [1]), room, 2)
        with pytest.raises(ValueError, match="leaves its file"):
            _native.key_records([mf.buffer], np.array([[0, 0, 0, FILE_SIZE - 10, 40]], np.int64), 1, 1)
        with pytest.raises(ValueError, match="leaves its file"):
            _native.key_records([mf.buffer], np.array([[1, 0, 0, 0, 40]], np.int64), 1, 1)
        with pytest.raises(ValueError, match="more taken rows"):
            _native.key_records([mf.buffer], np.array([[0, 0, 0, 0, 40]], np.int64), 2, 1)
    finally:
        log.close()


def test_a_key_named_twice_is_held_by_the_last_keys_property(tmp_path: Path) -> None:
    """record.h's one properties rule: a name met twice holds its last value, as decode_properties'
    dict (and Record.keys) keeps it; the kernel once took the first ``KEYS``."""
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        record = encode_record(topic="T", body=b"b", properties={"KEYS": "first\x02KEYS\x01last"}, born_host=V4,
                               store_host=V4)
        log.append(record, [len(record)], [0], 1_700_000_000_000)
        decoded = decode_record(bytes(record), check_crc=False).record
        assert decoded is not None and decoded.keys == ["last"]
        assert _holding(log, [[0], [0]], b"T", [b"first", b"last"], False, len(record)) == [[], [(0, bytes(record))]]
    finally:
        log.close()


def test_properties_that_pass_the_record_s_end_hold_no_key(tmp_path: Path) -> None:
    """A record whose PROPERTIESLENGTH points past its end is one decode_record calls corrupt
    (mq_record_locate's RECORD_PROPS_LEN): no key's, though its KEYS text is whole within it; the
    kernel once read the properties cut at the record's end."""
    log = CommitLog.open(tmp_path, FILE_SIZE)
    try:
        record = bytearray(encode_record(topic="T", body=b"b", properties={"KEYS": "k"}, born_host=V4,
                                         store_host=V4))
        props_len_pos = len(record) - len(b"KEYS\x01k\x02") - 2
        record[props_len_pos:props_len_pos + 2] = (len(b"KEYS\x01k\x02") + 5).to_bytes(2, "big")
        log.append(record, [len(record)], [0], 1_700_000_000_000)
        assert decode_record(bytes(record), check_crc=False).record is None
        assert _holding(log, [[0]], b"T", [b"k"], False, len(record)) == [[]]
    finally:
        log.close()
