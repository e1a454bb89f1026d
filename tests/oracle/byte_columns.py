"""Byte ranges of a buffer as an Arrow binary array, as the data source built them before the compiled
kernel (``mqstore.engine._native.gather_spans`` in ``mqstore.pipeline.byte_columns.binary_values``): short values
with one numpy index over all their bytes, longer ones described as a binary-view array pointing into
the buffer and cast to binary by Arrow."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Array = npt.NDArray[Any]

_INLINE = np.arange(12)  # bytes a binary view holds inline
_SHORT_VALUES = 24  # mean value size below which a plain index gather beats binary views
_VIEW_OFFSET_MAX = (1 << 31) - 1


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
