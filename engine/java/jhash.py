"""Java's ``String.hashCode``, one string at a time and many at once, and the tags code.

RocketMQ keys its consume-queue tag codes, its index slots and its shard picks on the JVM string
hash, computed over UTF-16 code units with 32-bit wraparound: ``h = 31 * h + unit``. Characters
outside the BMP count as two units (a surrogate pair), exactly as Java sees them. Strings are hashed
by the compiled kernels (``mqstore.engine._native.java_hash``, ``java_hashes``). The tags code is here; the
index's key hash, ``abs`` of the hash of ``topic#key``, is ``mqstore.engine.keyindex.keys``'; the shard rule
is ``mqstore.engine.put.queue_selector``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mqstore.engine import _native

_MASK32 = 0xFFFFFFFF


def java_hash(s: str) -> int:
    """Java ``String.hashCode()`` as a signed 32-bit int."""
    return _native.java_hash(s)


def tags_code(tags: str | None) -> int:
    """The consume-queue tagsCode of a TAGS value: 0 when absent, else its Java hash widened to a long."""
    if not tags:
        return 0
    return java_hash(tags)


def java_hashes(strings: Sequence[str]) -> list[int]:
    """``java_hash`` of many strings at once (one kernel call); a lone surrogate is one unit, as in Java."""
    out = np.empty(len(strings), np.int64)
    _native.java_hashes(strings if isinstance(strings, list) else list(strings), out)
    return out.tolist()
