"""Re-dispatch's kernel (``mqstore.engine._native.dispatch_keys`` under ``DispatchColumns.of``) against the numpy
code it replaced (tests/oracle/dispatch.py): for records with any properties (names given twice or
empty, KEYS with runs of spaces, text outside ASCII and outside the BMP, delayed messages, topics and
properties past the old matrices' widths) the same rows, topics and index keys; and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.batch.dispatch_columns import DispatchColumns
from mqstore.engine.batch.record_columns import RecordColumns
from mqstore.engine.log.host import Host
from mqstore.engine.log.record import encode_record
from tests.engine.batch.test_column_scan import Pairs
from tests.oracle.dispatch import DispatchColumnsOracle

HOST = Host("10.0.0.7", 4000)
TOPICS = ["T", "Orders", "SCHEDULE_TOPIC_XXXX", "Tö", "t" * 130, "T\U0001F600"]
TEXT = st.text(alphabet=st.sampled_from("ab Z0#é\x01\u4e2d\U0001F600"), max_size=12)


@st.composite
def batches(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "x", "TAGSX", "KEY", ""])
    values = TEXT | st.sampled_from(["3", "a b  c", " k1 ", "Tag0", "", "u" * 600, "k " * 300])
    buf = bytearray()
    starts = []
    for i in range(draw(st.integers(0, 12))):
        pairs = draw(st.lists(st.tuples(names, values), max_size=6))
        starts.append(len(buf))
        buf += encode_record(topic=draw(st.sampled_from(TOPICS)), body=b"x" * draw(st.integers(0, 3)),
                             properties=Pairs(pairs), queue_id=i % 3, born_host=HOST, store_host=HOST,
                             store_ms=1_700_000_000_000 + i, queue_offset=i, phys_offset=1000 + len(buf))
    return np.frombuffer(bytes(buf), np.uint8), np.array(starts, np.int64)


@settings(max_examples=400, deadline=None)
@given(batches())
def test_dispatch_columns_are_the_oracles(batch: tuple[np.ndarray, np.ndarray]) -> None:
    buf, starts = batch
    records = RecordColumns.of(buf, starts)
    assert records.valid_count == len(starts)
    got = DispatchColumns.of(buf, records)
    want = DispatchColumnsOracle.of(buf, records)
    for name in ("phys_offset", "size", "queue_id", "queue_offset", "tags_code", "store_ms", "sys_flag"):
        assert got.rows[name].tolist() == want.rows[name].tolist(), name
    # topics may be numbered in another order: the names each record's code stands for are the same
    assert [got.topics[c] for c in got.rows["topic"].tolist()] == [want.topics[c] for c in want.rows["topic"].tolist()]
    assert sorted(got.topics) == sorted(want.topics)
    assert got.key_rows.tolist() == want.key_rows.tolist()
    assert got.key_hashes.tolist() == want.key_hashes.tolist()


def _outputs(n: int) -> list[np.ndarray]:
    return [np.empty(n, np.int64) for _ in range(4)] + [np.empty(2 * n, np.int64), np.empty(2 * n, np.int64)]


@pytest.mark.parametrize(("pos", "length"), [(-1, 2), (0, 11), (9, 2), (0, -1)])
def test_the_kernel_refuses_a_topic_or_properties_outside_the_buffer(pos: int, length: int) -> None:
    good = np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="leave the 10-byte buffer"):
        _native.dispatch_keys(b"0123456789", np.array([pos]), np.array([length]), good, good, b"S", *_outputs(1))
    with pytest.raises(ValueError, match="leave the 10-byte buffer"):
        _native.dispatch_keys(b"0123456789", good, good, np.array([pos]), np.array([length]), b"S", *_outputs(1))


def test_the_kernel_refuses_columns_of_other_lengths_and_counts_keys_past_its_room() -> None:
    one = np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="differ in length"):
        _native.dispatch_keys(b"T", one, np.ones(2, np.int64), one, one, b"S", *_outputs(1))
    props = b"KEYS\x01a b c d e\x02UNIQ_KEY\x01u"
    buf = b"T" + props
    outputs = _outputs(1)
    assert _native.dispatch_keys(buf, one, np.ones(1, np.int64), np.ones(1, np.int64), np.array([len(props)]), b"S",
                                 *outputs) == (1, 6)  # one topic; six keys, though room for two only
    assert outputs[4].tolist() == [0, 0]
