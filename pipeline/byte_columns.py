"""Byte ranges of a mapped file as Arrow arrays, copied by Arrow's C++ rather than value by value.

``binary_values`` describes the ranges as a binary-view array pointing into the file (16 bytes per
value: the length, then up to 12 bytes inline, or a 4-byte prefix and the offset) and casts it to
plain binary; short values (topics, property names) are gathered with one numpy index instead, which
costs less than their views.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Array = npt.NDArray[Any]

_INLINE = np.arange(12)  # bytes a binary view holds inline
_SHORT_VALUES = 24  # mean value size below which a plain index gather beats binary views
_VIEW_OFFSET_MAX = (1 << 31) - 1


class NotExact(Exception):
    """The fast path cannot reproduce these values byte for byte: use the exact decoder."""


def binary_values(buf: Array, positions: Array, lengths: Array) -> pa.Array:
    """``buf[p:p+l]`` for every (p, l) as an Arrow binary array. The values are described as a
    binary-view array pointing into ``buf`` (16 bytes per value: the length, then up to 12 bytes
    inline, or a 4-byte prefix and the offset) and cast to binary: Arrow's C++ does the copying, at
    a fraction of the cost of slicing value by value in Python."""
    n = len(positions)
    if n == 0:
        return pa.array([], pa.binary())
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total <= _SHORT_VALUES * n or len(buf) > _VIEW_OFFSET_MAX:
        # short values (topics, property names): one index over all their bytes costs less than views
        index = np.repeat(positions - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                      pa.py_buffer(buf[index])])
    index = positions[:, None] + _INLINE
    np.minimum(index, len(buf) - 1, out=index)
    head = buf[index]
    views = np.zeros((n, 16), dtype=np.uint8)
    views[:, 0:4] = lengths.astype("<i4").view(np.uint8).reshape(n, 4)
    inline = lengths <= 12
    views[:, 4:16] = np.where(inline[:, None] & (lengths[:, None] > _INLINE), head, 0)
    out_of_line = ~inline
    views[out_of_line, 4:8] = head[out_of_line, :4]
    views[out_of_line, 12:16] = positions[out_of_line].astype("<i4").view(np.uint8).reshape(-1, 4)
    viewed = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), pa.py_buffer(buf)])
    return viewed.cast(pa.binary())


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
