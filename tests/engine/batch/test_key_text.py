"""Key text (mqstore.engine.batch.key_text): records' UNIQ_KEYs and KEYS as one UTF-8 text and its bounds, built
by one kernel call from strings, joined and cut as the lists of strings it replaced were (concatenated,
sliced), and checked off the wire: bounds that go back, leave the text or count other records, and text
that is not UTF-8 as Python decodes it, are refused, never read past."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.batch.key_text import BOUND, KeyText

TEXT = st.text(st.sampled_from("aZ0 #\x00\x7f\x80é\u0100\u4e2d\uffff\U00010000\U0001F600\U0010FFFF"), max_size=10)
RECORDS = st.lists(st.tuples(TEXT, TEXT), max_size=12)


def _of(records: list[tuple[str, str]]) -> KeyText:
    return KeyText.of([u for u, _ in records], [k for _, k in records])


@settings(max_examples=300, deadline=None)
@given(records=RECORDS)
def test_key_text_holds_each_records_strings_as_utf8_in_turn(records: list[tuple[str, str]]) -> None:
    text = _of(records)
    items = [s for pair in records for s in pair]
    assert bytes(text.text) == "".join(items).encode()
    assert text.bounds.tolist() == np.cumsum([0] + [len(s.encode()) for s in items]).tolist()
    assert text.bounds.dtype == BOUND and len(text) == len(records)
    assert text.strings() == ([k for _, k in records], [u for u, _ in records])
    text.check(len(records))
    assert KeyText.from_wire(*text.wire(), len(records)).strings() == text.strings()


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(RECORDS, min_size=1, max_size=4), cuts=st.lists(st.integers(0, 12), min_size=8, max_size=8))
def test_joined_and_cut_key_texts_are_the_joined_and_sliced_lists(parts: list[list[tuple[str, str]]],
                                                                   cuts: list[int]) -> None:
    """Parts cut first (bounds not starting at 0, as a batch after ``DispatchBatch.after``), then joined."""
    pieces, want = [], []
    for i, records in enumerate(parts):
        first, end = sorted((min(cuts[2 * i], len(records)), min(cuts[2 * i + 1], len(records))))
        pieces.append(_of(records).cut(first, end))
        want += records[first:end]
    joined = KeyText.join(pieces)
    assert joined.strings() == _of(want).strings()
    assert bytes(joined.text[int(joined.bounds[0]):int(joined.bounds[-1])]) == bytes(_of(want).text)
    joined.check(len(want))


@pytest.mark.parametrize(("text", "bounds", "count", "reason"), [
    (b"ab", [0, 1, 2], 2, "need 5 key bounds"),
    (b"ab", [0, 1, 2, 3], 1, "need 3 key bounds"),
    (b"ab", [0, 2, 1], 1, "goes back"),
    (b"ab", [0, 1, 3], 1, "leaves"),
    (b"ab", [-1, 1, 2], 1, "bound 0"),
    (b"a\xff", [0, 1, 2], 1, "record 0's KEYS is not UTF-8"),
    (b"\xc3\xa9", [0, 1, 2], 1, "UNIQ_KEY is not UTF-8"),  # a span cutting a character in two
    (b"\xed\xa0\x80", [0, 3, 3], 1, "not UTF-8"),  # a surrogate
    (b"\xc0\xaf", [0, 0, 2], 1, "not UTF-8"),  # an overlong '/'
    (b"\xf4\x90\x80\x80", [0, 0, 4], 1, "not UTF-8"),  # past U+10FFFF
])
def test_key_text_off_the_wire_is_refused_with_a_reason(text: bytes, bounds: list[int], count: int,
                                                        reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        KeyText.from_wire(text, np.array(bounds, BOUND).tobytes(), count)
    with pytest.raises(ValueError):
        KeyText.unchecked(text, bytes(5))


@given(text=st.binary(max_size=12), bounds=st.lists(st.integers(-4, 16), max_size=7))
def test_any_bytes_decode_as_python_does_or_are_refused(text: bytes, bounds: list[int]) -> None:
    packed = np.array(bounds, BOUND).tobytes()
    count = (len(bounds) - 1) // 2
    try:
        want = [text[a:b].decode() for a, b in pairwise(bounds)]
        ok = len(bounds) % 2 == 1 and 0 <= bounds[0] <= len(text) and all(a <= b <= len(text)
                                                                         for a, b in pairwise(bounds))
    except UnicodeDecodeError:
        ok = False
    if not ok:
        with pytest.raises(ValueError):
            _native.key_text_check(text, packed, count)
        return
    got = KeyText.from_wire(text, packed, count)
    assert got.strings() == (want[1::2], want[0::2])


def test_strings_that_are_not_str_are_refused() -> None:
    with pytest.raises(TypeError, match=r"keys\[1\] is int"):
        KeyText.of(["", ""], ["a", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="differ in length"):
        KeyText.of([""], ["a", "b"])


def test_a_part_whose_bounds_leave_its_text_is_refused_by_the_join() -> None:
    good = KeyText.of(["u"], ["k"])
    for bounds in ([0, 1, 3], [0, 1], [2, 1, 2], []):
        bad = KeyText(b"ab", np.array(bounds, BOUND))
        with pytest.raises(ValueError, match="key bound"):
            KeyText.join([good, bad])


@pytest.mark.parametrize("count", [-1, 1 << 30, 1 << 62])
def test_a_record_count_no_bounds_can_hold_is_refused_not_overflowed(count: int) -> None:
    with pytest.raises(ValueError, match="cannot have key bounds"):
        _native.key_text_check(b"", bytes(4), count)
