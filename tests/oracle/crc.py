"""RocketMQ's CRC of many spans as the engine computed it before the compiled kernels: one zlib call
a span (``mqstore.engine._native.crc31_spans`` and the CRCs inside the batch, scan and encode kernels)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import numpy.typing as npt


def crc31_spans(data: Any, starts: npt.ArrayLike, ends: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """``zlib.crc32(data[start:end]) & 0x7FFFFFFF`` of each span."""
    mv = memoryview(data)
    return np.array([zlib.crc32(mv[a:b]) for a, b in zip(np.asarray(starts).tolist(), np.asarray(ends).tolist(),
                                                           strict=True)], np.int64) & 0x7FFFFFFF
