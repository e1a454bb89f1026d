"""``mqstore.pipeline.byte_columns.binary_values`` (one ``mqstore.engine._native.gather_spans`` call) against the numpy
gather it replaced (``tests/oracle/byte_columns.py``): the same Arrow array, byte for byte, for short
values (the oracle's index path) and long ones (its binary-view path); spans that leave the buffer
are refused."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from hypothesis import given, settings  # after the importorskip
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.pipeline.byte_columns import binary_values
from tests.oracle.byte_columns import binary_values as oracle_binary_values


@st.composite
def spans(draw: st.DrawFn) -> tuple[bytes, np.ndarray, np.ndarray]:
    data = draw(st.binary(min_size=0, max_size=400))
    n = draw(st.integers(0, 20))
    long_values = draw(st.booleans())  # mean length past the oracle's 24: its binary-view path
    positions, lengths = [], []
    for _ in range(n):
        pos = draw(st.integers(0, len(data)))
        room = len(data) - pos
        length = draw(st.integers(min(room, 25) if long_values else 0, room if long_values else min(room, 20)))
        positions.append(pos)
        lengths.append(length)
    return data, np.array(positions, dtype=np.int64), np.array(lengths, dtype=np.int64)


@settings(max_examples=300, deadline=None)
@given(spans())
def test_binary_values_are_the_oracles(case: tuple[bytes, np.ndarray, np.ndarray]) -> None:
    data, positions, lengths = case
    buf = np.frombuffer(data, dtype=np.uint8)
    got = binary_values(buf, positions, lengths)
    assert got.to_pylist() == [data[p:p + n] for p, n in zip(positions.tolist(), lengths.tolist(), strict=True)]
    if len(positions):  # the oracle's empty case is pa.array([]): no buffers to compare
        want = oracle_binary_values(buf, positions, lengths)
        assert got.equals(want)


@pytest.mark.parametrize(("position", "length"), [(8, 4), (-1, 2), (3, -1), (12, 0)])
def test_spans_leaving_the_buffer_are_refused(position: int, length: int) -> None:
    buf = np.frombuffer(b"hello world", dtype=np.uint8)
    with pytest.raises(ValueError, match="leaves"):
        binary_values(buf, np.array([0, position]), np.array([2, length]))


def test_mismatched_buffers_are_refused() -> None:
    data = np.frombuffer(b"abcdef", dtype=np.uint8)
    with pytest.raises(ValueError, match="out holds"):
        _native.gather_spans(data, np.array([0]), np.array([3]), np.empty(2, np.int32), np.empty(2, np.uint8))
    with pytest.raises(ValueError, match="offsets"):
        _native.gather_spans(data, np.array([0]), np.array([3]), np.empty(1, np.int32), np.empty(3, np.uint8))
