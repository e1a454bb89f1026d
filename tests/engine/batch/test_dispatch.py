"""DispatchBatch.concat and after: batches joined (topic tables merged and renumbered) and cut at a
phys offset hold the same requests as the batches they came from."""

from __future__ import annotations

from itertools import chain

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.batch.dispatch import DispatchBatch, DispatchRequest

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
