"""What the fuzzer (``mqstore.scripts.survival.fuzz.command``) feeds, and to what: a ``Target`` per decoder
that takes bytes from outside, and the input strategies the targets share.

Each target has a hypothesis strategy (random bytes, byte-flipped and cut copies of valid inputs,
and structured inputs where the format has structure), a ``check`` that runs the code under test
on one input, and the exception types that count as a clear error. Anything else a check raises is
a crash; a check that raises ``Finding`` found something wrong without crashing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from mqstore.engine import Geometry

GEOMETRY = Geometry(commitlog_file_size=8 * 1024, cq_entries_per_file=16, index_slot_count=16,
                    index_entry_count=64)  # the stores targets build: files roll within a few inputs


class Finding(Exception):
    """Wrong without a crash: a reply saying SYSTEM_ERROR, a request left unanswered."""


@dataclass
class Target:
    """``expand``: inputs run per hypothesis example: the example, then byte-flipped copies of it
    (hypothesis's own bookkeeping costs more per example than a cheap decoder does)."""

    name: str
    strategy: st.SearchStrategy[Any]
    check: Callable[[Any], None]
    clear: tuple[type[BaseException], ...] = ()
    close: Callable[[], None] = field(default=lambda: None)
    expand: int = 1
    stats: Callable[[], dict[str, Any]] = field(default=dict)
    keeps_no_files: bool = True  # every input's files are closed again (the wire target's store grows)


def mutated(seeds: list[bytes], max_flips: int = 8) -> st.SearchStrategy[bytes]:
    """A seed with bytes flipped, inserted or dropped, maybe cut short."""
    def apply(seed: bytes, edits: list[tuple[int, int, int]], cut: int) -> bytes:
        data = bytearray(seed)
        for kind, where, value in edits:
            if not data:
                break
            pos = where % len(data)
            if kind == 0:
                data[pos] = value
            elif kind == 1:
                data[pos] ^= 1 << (value % 8)
            elif kind == 2:
                data.insert(pos, value)
            else:
                del data[pos]
        return bytes(data[:cut] if cut < len(data) else data)
    edit = st.tuples(st.integers(0, 3), st.integers(0, 1 << 20), st.integers(0, 255))
    return st.builds(apply, st.sampled_from(seeds), st.lists(edit, max_size=max_flips),
                     st.one_of(st.just(1 << 30), st.integers(0, 4096)))


def bytes_like(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=512), mutated(seeds), mutated(seeds), mutated(seeds))
