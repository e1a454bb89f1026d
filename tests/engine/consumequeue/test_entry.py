"""The consume-queue entry's one rule: valid, holds a message, live; one entry or a column alike."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mqstore.engine.consumequeue.entry import (
    CQ_DTYPE,
    FILLER_SIZE,
    decode_entry,
    encode_entry,
    entry_holds_message,
    entry_live,
    entry_valid,
    valid_prefix,
)

PHYS = st.one_of(st.sampled_from([-(1 << 63), -1, 0, 1, 4096, (1 << 63) - 1]), st.integers(-(1 << 63), (1 << 63) - 1))
SIZE = st.one_of(st.sampled_from([-(1 << 31), -1, 0, 1, 212, FILLER_SIZE - 1, FILLER_SIZE]),
                 st.integers(-(1 << 31), (1 << 31) - 1))
ROWS = st.lists(st.tuples(PHYS, SIZE), max_size=40)


def _column(rows: list[tuple[int, int]]) -> np.ndarray:
    entries = np.zeros(len(rows), dtype=CQ_DTYPE)
    if rows:
        entries["phys_offset"], entries["size"] = zip(*rows, strict=True)
    return entries


def test_the_rule_on_the_edges() -> None:
    assert entry_valid(0, 1) and entry_valid(4096, 212)
    assert not entry_valid(0, 0)  # a zeroed slot past the builder's end
    assert not entry_valid(-1, 212) and not entry_valid(4096, -5)
    assert entry_valid(0, FILLER_SIZE) and not entry_holds_message(0, FILLER_SIZE)  # a filler holds a place
    assert entry_holds_message(4096, 212) and not entry_holds_message(0, 0)
    assert entry_live(4096, 212, 4096) and not entry_live(4095, 212, 4096)
    assert not entry_live(8192, FILLER_SIZE, 0)


@given(ROWS, st.integers(0, 1 << 40))
def test_one_entry_and_a_column_answer_alike(rows: list[tuple[int, int]], min_phys_offset: int) -> None:
    entries = _column(rows)
    phys, size = entries["phys_offset"], entries["size"]
    assert entry_valid(phys, size).tolist() == [entry_valid(p, s) for p, s in rows]
    assert entry_holds_message(phys, size).tolist() == [entry_holds_message(p, s) for p, s in rows]
    assert entry_live(phys, size, min_phys_offset).tolist() == [entry_live(p, s, min_phys_offset) for p, s in rows]
    assert all(type(entry_valid(p, s)) is bool for p, s in rows)


@given(ROWS)
def test_valid_prefix_ends_at_the_first_entry_that_is_not_valid(rows: list[tuple[int, int]]) -> None:
    n_valid = valid_prefix(_column(rows))
    assert all(entry_valid(p, s) for p, s in rows[:n_valid])
    assert n_valid == len(rows) or not entry_valid(*rows[n_valid])


@given(PHYS, SIZE, st.integers(-(1 << 63), (1 << 63) - 1))
def test_entry_round_trip(phys_offset: int, size: int, tags_code: int) -> None:
    data = encode_entry(phys_offset, size, tags_code)
    assert len(data) == CQ_DTYPE.itemsize == 20
    assert decode_entry(data) == (phys_offset, size, tags_code)
    row = np.frombuffer(data, dtype=CQ_DTYPE)[0]
    assert (int(row["phys_offset"]), int(row["size"]), int(row["tags_code"])) == (phys_offset, size, tags_code)
