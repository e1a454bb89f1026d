"""Key text: the UNIQ_KEY and KEYS of a batch's records as one UTF-8 text and the bounds of its spans.

What a producer-encoded request carries beside its records, what the writer checks and passes on in
its ``dispatch`` frame, and what the index builder hashes as ``topic#key`` (``mqstore.engine.keyindex.keys``):
bytes and an int32 column, never a Python string per record.

    field   dtype  meaning
    text    bytes  every record's UNIQ_KEY ("" for none), then its KEYS (space separated, "" for
                   none), as UTF-8, one after another
    bounds  <i4    2n + 1 positions in text: record r's UNIQ_KEY is text[bounds[2r]:bounds[2r + 1]],
                   its KEYS text[bounds[2r + 1]:bounds[2r + 2]]

The first bound need not be 0: records cut from a batch (``cut``) keep the batch's text. One compiled
call builds it from strings (``_native.key_text``), one checks it off the wire (``_native.key_text_check``:
bounds that never go back, stay in the text, and cut valid UTF-8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mqstore.engine import _native

Array = np.ndarray[Any, Any]
BOUND = np.dtype("<i4")


@dataclass(frozen=True, slots=True)
class KeyText:
    text: bytes | memoryview
    bounds: Array  # BOUND, 2n + 1

    def __len__(self) -> int:
        return len(self.bounds) // 2

    @classmethod
    def of(cls, uniq_keys: list[str], keys: list[str]) -> KeyText:
        """The key text of records given as strings; TypeError for an item that is not a str."""
        bounds = np.empty(2 * len(keys) + 1, BOUND)
        return cls(_native.key_text(uniq_keys, keys, bounds), bounds)

    @classmethod
    def from_wire(cls, text: bytes | memoryview, bounds: bytes | memoryview, count: int) -> KeyText:
        """The key text of ``count`` records as a frame carries it; ValueError when it is not one."""
        _native.key_text_check(text, bounds, count)
        return cls(text, np.frombuffer(bounds, BOUND))

    @classmethod
    def unchecked(cls, text: bytes, bounds: bytes) -> KeyText:
        """The key text a request carries, to be checked with its batch (``check``); ValueError when
        the bounds are not whole int32s."""
        if len(bounds) % BOUND.itemsize:
            raise ValueError("key_bounds must be whole int32s")
        return cls(text, np.frombuffer(bounds, BOUND))

    def check(self, count: int) -> None:
        """ValueError unless this is the key text of ``count`` records (``_native.key_text_check``)."""
        _native.key_text_check(self.text, self.bounds, count)

    @classmethod
    def join(cls, parts: list[KeyText]) -> KeyText:
        """Consecutive records' key texts as one: texts joined, each one's bounds moved to where its text
        lands (one kernel call, ``_native.key_text_join``); ValueError for a part whose bounds leave its text."""
        if len(parts) == 1:
            return parts[0]
        bounds = np.empty(sum(len(p.bounds) - 1 for p in parts) + 1, BOUND)
        return cls(_native.key_text_join([p.text for p in parts], [p.bounds for p in parts], bounds), bounds)

    def cut(self, first: int, end: int | None = None) -> KeyText:
        """Records [first, end) (end: the last), the text shared."""
        last = len(self) if end is None else end
        return KeyText(self.text, self.bounds[2 * first:2 * last + 1])

    def wire(self) -> tuple[bytes, bytes]:
        """(text, bounds) as a frame carries them."""
        return bytes(self.text), self.bounds.tobytes()

    def strings(self) -> tuple[list[str], list[str]]:
        """Each record's KEYS and UNIQ_KEY as strings (the record path's form)."""
        b = self.bounds.tolist()
        text = bytes(self.text)
        spans = [text[b[i]:b[i + 1]].decode() for i in range(len(b) - 1)]
        return spans[1::2], spans[0::2]
