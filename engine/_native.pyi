# The compiled kernels of engine/csrc (see module.c for each one's contract). Buffers are anything
# that exports the buffer protocol: bytes, memoryview, mmap, numpy arrays.
from typing import Any

def crc31_spans(data: Any, starts: Any, ends: Any, out: Any, /) -> None: ...
def index_select(header: Any, slots: Any, entries: Any, keys: Any, begin_ms: int, end_ms: int, /
                 ) -> tuple[list[list[int]], list[int]]: ...
