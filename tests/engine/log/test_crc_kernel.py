"""The compiled CRC loop (mqstore.engine._native.crc31_spans, the CRC inside the batch, scan and encode
kernels, and the subject of scripts/bench/kernel_choice) against zlib: RocketMQ's CRC is the low
31 bits of zlib's CRC-32."""

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.log.record import body_crc
from tests.oracle.crc import crc31_spans as oracle


def crc31_spans(data: object, starts: list[int], ends: list[int]) -> np.ndarray:
    out = np.empty(len(starts), np.int64)
    _native.crc31_spans(data, np.asarray(starts, np.int64), np.asarray(ends, np.int64), out)
    return out


@st.composite
def data_and_spans(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int]]]:
    data = draw(st.binary(max_size=600))
    cuts = st.integers(0, len(data))
    spans = draw(st.lists(st.tuples(cuts, cuts).map(sorted), max_size=20))
    return data, [(a, b) for a, b in spans]


@settings(max_examples=300, deadline=None)
@given(data_and_spans())
def test_every_span_matches_zlib(case: tuple[bytes, list[tuple[int, int]]]) -> None:
    data, spans = case
    starts = [a for a, _ in spans]
    ends = [b for _, b in spans]
    got = crc31_spans(data, starts, ends)
    assert got.tolist() == [zlib.crc32(data[a:b]) & 0x7FFFFFFF for a, b in spans]
    assert got.tolist() == [body_crc(data[a:b]) for a, b in spans]
    assert got.tolist() == oracle(data, starts, ends).tolist()


def test_reads_numpy_buffers_in_place() -> None:
    data = np.frombuffer(bytes(range(256)) * 40, np.uint8)
    assert crc31_spans(data, [0, 7], [len(data), 9000]).tolist() == \
        [body_crc(data.tobytes()), body_crc(data.tobytes()[7:9000])]


@pytest.mark.parametrize(("start", "end"), [(-1, 3), (5, 4), (0, 11)])
def test_a_span_outside_the_buffer_is_refused(start: int, end: int) -> None:
    with pytest.raises(ValueError, match="leaves the 10-byte buffer"):
        crc31_spans(b"0123456789", [0, start], [10, end])


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        _native.crc31_spans(b"abc", np.zeros(2, np.int64), np.zeros(1, np.int64), np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="whole int64s"):
        _native.crc31_spans(b"abc", b"\0" * 7, b"\0" * 7, bytearray(7))


def test_every_length_and_alignment_matches_zlib() -> None:
    """Spans from 0 to 1,100 bytes at 16 alignments: the table loop alone (under 64 bytes), and the
    carry-less folding where the CPU has it, with every count of 64-byte steps, 16-byte blocks and
    last bytes it can end on."""
    data = bytes(np.random.default_rng(14).integers(0, 256, 1200, np.uint8))
    spans = [(a, a + n) for n in range(1101) for a in range(16)]
    got = crc31_spans(data, [a for a, _ in spans], [b for _, b in spans])
    assert got.tolist() == [zlib.crc32(data[a:b]) & 0x7FFFFFFF for a, b in spans]


def test_a_long_span_matches_zlib() -> None:
    data = bytes(np.random.default_rng(15).integers(0, 256, (1 << 20) + 13, np.uint8))
    assert crc31_spans(data, [0, 5, 13], [len(data), len(data), 1 << 20]).tolist() == \
        [zlib.crc32(data[a:b]) & 0x7FFFFFFF for a, b in ((0, len(data)), (5, len(data)), (13, 1 << 20))]
