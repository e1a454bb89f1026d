"""The writer's plan for producer-encoded batches: merging a poll round's requests, cutting its replies."""

from __future__ import annotations

import numpy as np
import pytest

from engine import StoreConfig
from engine.batch.plan import EncodedRequest, check, merge, reply_rows, reply_rows_each
from engine.batch.record_batch import COLUMNS, BatchError
from engine.log.host import Host
from engine.log.message import PutStatus
from engine.log.writer import BatchOutcome
from ipc.encoded import BatchEncoder, Encoding
from ipc.messages import Outgoing

ENCODER = BatchEncoder(Encoding(Host("10.0.0.7", 10911), True, 1 << 20))


def _request(*bodies: bytes, topic: str = "A") -> EncodedRequest:
    b = ENCODER.encode([Outgoing(topic, body, tags="T") for body in bodies])
    return EncodedRequest(b.records, b.columns, b.topics, b.tags, b.keys, b.uniq_keys)


def test_merge_refuses_torn_columns_instead_of_raising_value_error() -> None:
    """Columns that were not whole rows made numpy raise ValueError in the merge, which the writer
    did not expect there: one such request in a round killed the writer."""
    good, torn = _request(b"a"), _request(b"b")
    torn = EncodedRequest(torn.records, torn.columns[:-3], torn.topics, torn.tags, torn.keys, torn.uniq_keys)
    with pytest.raises(BatchError, match="whole rows"):
        merge([good, torn])


def test_merge_joins_views_of_receive_buffers_and_remaps_tables() -> None:
    first, second = _request(b"x" * 10, topic="A"), _request(b"y" * 20, b"z", topic="B")
    views = [EncodedRequest(memoryview(r.records), r.columns, r.topics, r.tags, r.keys, r.uniq_keys)
             for r in (first, second)]
    merged = merge(views)
    assert bytes(merged.records) == bytes(first.records) + bytes(second.records)
    assert merged.topics == ["A", "B"] and merged.tags == ["T"]
    assert len(merged.keys) == len(merged.uniq_keys) == 3


def test_requests_with_one_table_are_joined_as_they_are_and_a_stray_tag_is_still_refused() -> None:
    """Batches of one producer to one topic share their tables: merged without remapping, so an index
    outside them is left for check to refuse, and the writer then takes the round apart."""
    first, second = _request(b"x" * 10), _request(b"y" * 20, b"z")
    merged = merge([first, second])
    assert merged.columns == first.columns + second.columns
    assert merged.topics == ["A"] and merged.tags == ["T"] and len(merged.keys) == 3
    rows = np.frombuffer(second.columns, COLUMNS).copy()
    rows["tag"][0] = 5
    stray = EncodedRequest(second.records, rows.tobytes(), second.topics, second.tags, second.keys, second.uniq_keys)
    with pytest.raises(BatchError, match="tag outside"):
        check(merge([first, stray]), StoreConfig(store_host=Host("10.0.0.7", 10911)), 100)


@pytest.mark.parametrize("written", [0, 2, 3, 5, 6])
def test_replies_cut_from_one_packing_are_each_requests_rows(written: int) -> None:
    """A round's replies are packed once and cut by request: each is the rows ``reply_rows`` gives
    that request alone, whatever the append wrote before it stopped."""
    queue_ids = np.array([1, 0, 3, 2, 1, 0], np.int64)
    outcome = BatchOutcome(np.arange(written, dtype=np.int64) * 100, np.arange(written, dtype=np.int64), 5,
                           (PutStatus.PUT_OK, ""))
    counts = [2, 1, 3]
    starts = [0, 2, 3]
    assert reply_rows_each(queue_ids, outcome, counts) == [
        reply_rows(queue_ids, outcome, start, start + count) for start, count in zip(starts, counts, strict=True)]
