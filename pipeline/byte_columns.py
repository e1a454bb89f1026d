"""Byte ranges of a mapped file as Arrow arrays: ``binary_values`` copies them one after another
into an Arrow binary array's buffers with one kernel call, whatever their sizes."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from mqstore.engine import _native

Array = npt.NDArray[Any]


class NotExact(Exception):
    """The fast path cannot reproduce these values byte for byte: use the exact decoder."""


def binary_values(buf: Array, positions: Array, lengths: Array) -> pa.Array:
    """``buf[p:p+l]`` for every (p, l) as an Arrow binary array, its buffers filled by one kernel call
    (``mqstore.engine._native.gather_spans``). The numpy gather it replaced is the oracle in
    ``tests/oracle/byte_columns.py``."""
    n = len(positions)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    offsets = np.empty(n + 1, dtype=np.int32)
    data = np.empty(int(lengths.sum()), dtype=np.uint8)
    _native.gather_spans(buf, np.ascontiguousarray(positions, dtype=np.int64), lengths, offsets, data)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def as_numpy(values: pa.Array) -> tuple[Array, Array]:
    """A binary array's (data bytes, int64 offsets of n + 1) as numpy views."""
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=len(values) + 1).astype(np.int64)
    data_buffer = values.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None and data_buffer.size \
        else np.zeros(0, dtype=np.uint8)
    return data, offsets


def utf8(values: pa.Array) -> pa.Array:
    """Binary values as UTF-8 strings (the cast checks them); invalid UTF-8 goes to the exact decoder."""
    try:
        return values.cast(pa.string())
    except pa.ArrowInvalid as exc:
        raise NotExact from exc
