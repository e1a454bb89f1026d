"""The scan kernels (``mqstore.engine._native.record_columns`` and ``scan_records``, behind ``RecordColumns`` and
``column_scan.walk``) held to the numpy decoding they replaced (``tests/oracle/batch.py``), byte for
byte: every column of every record, how many lead before the first broken one and why, the topic and
CRC verdicts, and where and why a walk stops; on logs of random records (IPv6 hosts, MAGIC_V2 topics,
sealed and unsealed properties, ``__CRC32#`` named elsewhere) that are then damaged: flipped bytes,
garbled topics, torn (zeroed) and cut tails, blanks, positions inside records."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mqstore.engine.batch.column_scan import walk
from mqstore.engine.batch.record_columns import (
    CHECK_CRC,
    CHECK_TOPIC,
    COLUMN_NAMES,
    DECODER,
    REASONS,
    REQUIRE_PROP_CRC,
    RecordColumns,
)
from mqstore.engine.log.record import DecodeKind, decode_record, encode_blank, encode_record, seal_record
from tests.engine.batch.test_column_scan import V4, records
from tests.oracle import batch as oracle

settings_ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
damages = st.lists(st.tuples(st.sampled_from(["flip", "topic", "zeros", "cut", "blank"]), st.floats(0, 1),
                             st.integers(1, 255), st.binary(min_size=1, max_size=8)), max_size=3)


@st.composite
def logs(draw: st.DrawFn) -> tuple[np.ndarray[Any, Any], list[int]]:
    """Records back to back (sealed where asked), then damaged; with every record's start."""
    buf, starts = bytearray(), []
    for i, rec in enumerate(draw(st.lists(records(), min_size=1, max_size=20))):
        encoded = encode_record(born_ms=1_700_000_000_000 + i, store_ms=1_700_000_000_500 + i, queue_offset=i,
                                phys_offset=len(buf), **rec)  # type: ignore[arg-type]
        if rec["prop_crc"]:
            seal_record(encoded, 0, len(encoded))
        starts.append(len(buf))
        buf += encoded
    for kind, where, value, garbage in draw(damages):
        if not buf:
            break
        at = int(where * (len(buf) - 1))
        if kind == "flip":
            buf[at] ^= value
        elif kind == "topic":  # a record's topic bytes garbled, its length kept: UTF-8 or not
            start = max(s for s in starts if s <= at)
            topic = RecordColumns.of(np.frombuffer(bytes(buf), np.uint8), np.array([start]))
            pos, length = int(topic.topic_pos[0]), int(topic.topic_len[0])
            if topic.valid_count and length:
                buf[pos:pos + min(length, len(garbage))] = garbage[:length]
        elif kind == "zeros":
            buf[at:] = bytes(len(buf) - at)
        elif kind == "cut":
            del buf[at:]
        else:
            buf[at:at + 8] = encode_blank(value)
    return np.frombuffer(bytes(buf), np.uint8), starts


def assert_same_columns(got: RecordColumns, want: RecordColumns) -> None:
    for name in COLUMN_NAMES:
        assert getattr(got, name).tolist() == getattr(want, name).tolist(), name
    assert (got.valid_count, got.reason) == (want.valid_count, want.reason)


@settings_
@given(logs(), st.lists(st.integers(0, 5000), max_size=4), st.floats(0, 1))
def test_columns_of_any_starts_are_the_oracles(log: tuple[np.ndarray[Any, Any], list[int]], extra: list[int],
                                               cut: float) -> None:
    """Record starts, positions inside records and past the end, any limit: the same columns (bytes past
    the end read as zeros), the same count of leading valid records and reason."""
    buf, starts = log
    positions = np.array(sorted(starts + extra), np.int64)
    limit = int(cut * len(buf))
    for lim in (None, limit):
        assert_same_columns(RecordColumns.of(buf, positions, lim), oracle.record_columns_of(buf, positions, lim))
        assert_same_columns(RecordColumns.of(buf, positions[:1], lim),
                            oracle.record_columns_of(buf, positions[:1], lim))


@settings_
@given(logs())
def test_topic_and_crc_verdicts_are_the_oracles(log: tuple[np.ndarray[Any, Any], list[int]]) -> None:
    buf, starts = log
    layout = RecordColumns.of(buf, np.array(starts, np.int64))
    valid = layout.head(layout.valid_count)
    assert valid.first_bad_topic(buf) == oracle.first_bad_topic(valid, buf)
    for require in (False, True):
        assert valid.first_crc_failure(buf, require_prop_crc=require) == \
            oracle.first_crc_failure(valid, buf, require_prop_crc=require)


LEADS = [0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5,
         0xFF]
FOLLOWS = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0]
sequences = st.tuples(st.sampled_from(LEADS), st.lists(st.sampled_from(FOLLOWS), max_size=3))


@settings_
@given(st.lists(sequences, min_size=1, max_size=4).map(lambda seqs: bytes(b for lead, rest in seqs
                                                                          for b in [lead, *rest])))
@example(b"\xed\xa0\x80")  # a surrogate
@example(b"\xe0\x80\x80")  # an overlong form
@example(b"\xf4\x90\x80\x80")  # past U+10FFFF
@example(b"a\xe1\x80")  # a sequence the topic's end cuts
def test_a_topic_is_utf8_exactly_when_python_decodes_it(topic: bytes) -> None:
    """Overlong forms, surrogates, code points past U+10FFFF, truncated sequences: the kernel's UTF-8
    check says what ``bytes.decode`` says."""
    record = encode_record(topic="t" * len(topic), body=b"", properties={}, born_host=V4, store_host=V4)
    buf = np.frombuffer(bytes(record).replace(b"t" * len(topic), topic, 1), np.uint8)
    try:
        topic.decode("utf-8")
        python_takes_it = True
    except UnicodeDecodeError:
        python_takes_it = False
    layout = RecordColumns.of(buf, np.array([0], np.int64))
    assert layout.first_bad_topic(buf) == (1 if python_takes_it else 0) == oracle.first_bad_topic(layout, buf)


def _oracle_walk(buf: np.ndarray[Any, Any], stop_pos: int, max_rows: int, checks: int
                 ) -> tuple[RecordColumns, list[int], int, str]:
    """What the numpy scan made of a chunk: the walk's starts, their layout, cut at the topic and CRC checks."""
    state = oracle._Walk(0)
    with memoryview(buf) as mv:  # type: ignore[arg-type]  # numpy arrays export the buffer protocol
        starts, why = oracle.walk(buf, mv, state, stop_pos, max_rows)
    layout = oracle.record_columns_of(buf, starts)
    n, reason = layout.valid_count, layout.reason
    if checks & CHECK_TOPIC and oracle.first_bad_topic(layout.head(n), buf) < n:
        n, reason = oracle.first_bad_topic(layout.head(n), buf), "topic is not UTF-8"
    if checks & CHECK_CRC and n:
        n_crc, why_crc = oracle.first_crc_failure(layout.head(n), buf, require_prop_crc=bool(checks & REQUIRE_PROP_CRC))
        if n_crc < n:
            n, reason = n_crc, why_crc
    head = layout.head(n)
    cut = oracle.record_columns_of(buf, head.starts)
    if n < len(starts):
        return cut, starts.tolist(), int(starts[n]), f"bad: {reason}"
    return cut, starts.tolist(), state.pos, why


@settings_
@given(logs(), st.sampled_from([0, CHECK_TOPIC, CHECK_TOPIC | CHECK_CRC, CHECK_TOPIC | CHECK_CRC | REQUIRE_PROP_CRC]),
       st.floats(0, 1), st.integers(1, 30))
def test_a_walk_stops_where_and_why_the_oracles_does(log: tuple[np.ndarray[Any, Any], list[int]], checks: int,
                                                     stop: float, max_rows: int) -> None:
    buf, _ = log
    stop_pos = int(stop * len(buf)) + 1
    want, _, want_pos, want_why = _oracle_walk(buf, stop_pos, max_rows, checks)
    got, pos, why, code = walk(buf, 0, stop_pos, max_rows, checks)
    if code == DECODER:  # the kernel hands such a record to the decoder, as the oracle did
        decoded = decode_record(buf.tobytes(), pos, check_crc=True, read_body=False)
        if decoded.kind is DecodeKind.RECORD:
            assert len(got) < len(want) and int(want.starts[len(got)]) == pos
            return
        assert (pos, f"bad: {decoded.reason}") == (want_pos, want_why)
    else:
        assert (pos, f"bad: {REASONS[code]}" if code else why) == (want_pos, want_why)
    assert_same_columns(got, want.head(len(got)) if code == DECODER else want)


def test_bad_arguments_are_refused() -> None:
    from mqstore.engine import _native
    buf = np.zeros(64, np.uint8)
    with pytest.raises(ValueError, match="starts at"):
        _native.record_columns(buf, np.array([-1], np.int64), 64, 0, np.empty(22, np.int64))
    with pytest.raises(ValueError, match="limit"):
        _native.record_columns(buf, np.array([0], np.int64), 65, 0, np.empty(22, np.int64))
    with pytest.raises(ValueError, match="columns"):
        _native.record_columns(buf, np.array([0], np.int64), 64, 0, np.empty(21, np.int64))
    with pytest.raises(ValueError, match="outside"):
        _native.scan_records(buf, 65, 64, 1, 0, np.empty(22, np.int64))
    with pytest.raises(ValueError, match="columns"):
        _native.scan_records(buf, 0, 64, 2, 0, np.empty(22, np.int64))
