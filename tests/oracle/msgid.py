"""The Python UNIQ_KEY batch that engine/csrc/msgid.c replaced (``UniqKeyGenerator.next_many``): not a
runtime path, only what the property test holds ``_native.uniq_keys`` to, string for string."""

from __future__ import annotations

_HEX2 = tuple(f"{i:02X}" for i in range(256))  # a counter's two bytes, as an id spells them


def uniq_keys(head: str, counter: int, count: int) -> list[str]:
    """``count`` ids: ``head`` then the 16-bit counter in hex, from ``counter`` on, wrapping at 65536."""
    ids: list[str] = []
    while len(ids) < count:  # a run of ids sharing the counter's high byte is one map over _HEX2
        low = counter & 0xFF
        run = min(256 - low, count - len(ids))
        ids += map(f"{head}{_HEX2[counter >> 8 & 0xFF]}".__add__, _HEX2[low:low + run])
        counter += run
    return ids
