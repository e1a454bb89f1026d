"""DispatchBatch.concat and after: batches joined (topic tables merged and renumbered) and cut at a
phys offset hold the same requests as the batches they came from; read off the wire without their
keys, the same columns."""

from __future__ import annotations

from itertools import chain

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine.batch.dispatch import DispatchBatch, DispatchRequest

TOPICS = ["T", "Orders", "Tö"]


@st.composite
def batches(draw: st.DrawFn) -> list[list[DispatchRequest]]:
    phys = 0
    out = []
    for _ in range(draw(st.integers(1, 5))):
        requests = []
        for i in range(draw(st.integers(0, 6))):
            keys = tuple(draw(st.lists(st.sampled_from(["k", "j"]), max_size=2)))
            requests.append(DispatchRequest(draw(st.sampled_from(TOPICS)), i % 3, phys, 50, draw(st.integers(-5, 5)),
                                            1_700_000_000_000 + phys, i, keys, draw(st.sampled_from([None, "U1"])),
                                            draw(st.sampled_from([0, 0x8, 0xC]))))
            phys += 50
        out.append(requests)
    return out


@settings(max_examples=200, deadline=None)
@given(batches(), st.integers(0, 1500))
def test_joined_and_cut_batches_hold_the_requests_they_came_from(parts: list[list[DispatchRequest]], cut: int) -> None:
    joined = DispatchBatch.concat([DispatchBatch.from_requests(p) for p in parts])
    every = list(chain.from_iterable(parts))
    assert list(joined.requests()) == every
    assert list(joined.after(cut).requests()) == [r for r in every if r.phys_offset >= cut]


def _off_the_wire(batch: DispatchBatch, keys: bool) -> DispatchBatch:
    columns, text, bounds = batch.wire()
    return DispatchBatch.from_wire(len(batch), len(text), batch.topics, bytes(columns), bytes(text), bytes(bounds),
                                   keys=keys)


@settings(max_examples=100, deadline=None)
@given(batches(), st.integers(0, 1500))
def test_batches_read_without_their_keys_join_and_cut_the_same_columns(parts: list[list[DispatchRequest]],
                                                                       cut: int) -> None:
    """What a builder that reads no keys applies: the same rows and topics, no key text to ask for."""
    whole = [DispatchBatch.from_requests(p) for p in parts]
    with_keys = DispatchBatch.concat([_off_the_wire(b, True) for b in whole])
    without = DispatchBatch.concat([_off_the_wire(b, False) for b in whole])
    assert list(with_keys.requests()) == list(chain.from_iterable(parts))
    for joined in (without, without.after(cut)):
        assert joined.keys is None
        with pytest.raises(ValueError, match="without its key text"):
            joined.index_keys()
    assert without.columns.tobytes() == with_keys.columns.tobytes() and without.topics == with_keys.topics
    assert without.after(cut).columns.tobytes() == with_keys.after(cut).columns.tobytes()


def test_one_batch_joined_is_itself_and_read_off_the_wire_in_place() -> None:
    batch = DispatchBatch.from_requests([DispatchRequest("T", 0, 0, 50, 1, 2, 0, ("k",), "U1", 0)])
    columns, text, bounds = batch.wire()
    read = DispatchBatch.from_wire(1, len(text), ["T"], columns, text, bounds)
    assert DispatchBatch.concat([read]) is read
    assert np.shares_memory(read.columns, np.frombuffer(columns, np.uint8))
    for count, key_bytes in ((2, len(text)), (0, len(text)), (1, len(text) + 1)):
        with pytest.raises(ValueError, match="not those of"):
            DispatchBatch.from_wire(count, key_bytes, ["T"], columns, text, bounds, keys=False)


@pytest.mark.parametrize("count", [1, 2, 64, 65, 300])
def test_a_topic_index_past_the_table_is_refused_in_a_batch_of_any_size(count: int) -> None:
    """Small batches find their largest topic index in Python, large ones with numpy: both refuse one
    past the table, wherever in the batch it sits."""
    batch = DispatchBatch.from_requests([DispatchRequest("AB"[i % 2], 0, 50 * i, 50, 0, 0, i, (), None, 0)
                                         for i in range(count)])
    for row in {0, count // 2, count - 1}:
        columns = batch.columns.copy()
        columns["topic"][row] = 2
        text, bounds = batch.key_text().wire()
        wire = columns.view(np.uint8).data
        with pytest.raises(ValueError, match="disagree"):
            DispatchBatch.from_wire(count, len(text), ["A", "B"], wire, text, bounds, keys=False)
        columns["topic"][row] = 1
        assert len(DispatchBatch.from_wire(count, len(text), ["A", "B"], columns.view(np.uint8).data, text, bounds,
                                           keys=False)) == count
