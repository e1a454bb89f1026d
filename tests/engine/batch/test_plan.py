"""The writer's plan for producer-encoded batches: merging a poll round's requests, picking their queues
(held to the request-by-request and topic-by-topic versions, tests/oracle/plan.py), cutting its replies."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import StoreConfig
from engine.batch.key_text import KeyText
from engine.batch.plan import EncodedRequest, check, merge, pick_queues, reply_rows, reply_rows_each
from engine.batch.record_batch import COLUMNS, QUEUE_ROUND_ROBIN, BatchError, CheckedBatch
from engine.log.host import Host
from engine.log.message import PutStatus
from engine.log.writer import BatchOutcome
from engine.queue_selector import RoundRobin
from engine.topics import TopicTable
from ipc.encoded import BatchEncoder, Encoding
from ipc.messages import Outgoing
from tests.oracle import plan as oracle

ENCODER = BatchEncoder(Encoding(Host("10.0.0.7", 10911), True, 1 << 20))


def _request(*bodies: bytes, topic: str = "A") -> EncodedRequest:
    b = ENCODER.encode([Outgoing(topic, body, tags="T") for body in bodies])
    return EncodedRequest(b.records, b.columns, b.topics, b.tags, KeyText.of(b.uniq_keys, b.keys))


def test_merge_refuses_torn_columns_instead_of_raising_value_error() -> None:
    """Columns that were not whole rows made numpy raise ValueError in the merge, which the writer
    did not expect there: one such request in a round killed the writer."""
    good, torn = _request(b"a"), _request(b"b")
    torn = EncodedRequest(torn.records, torn.columns[:-3], torn.topics, torn.tags, torn.keys)
    with pytest.raises(BatchError, match="whole rows"):
        merge([good, torn])


def test_merge_joins_views_of_receive_buffers_and_remaps_tables() -> None:
    first, second = _request(b"x" * 10, topic="A"), _request(b"y" * 20, b"z", topic="B")
    views = [EncodedRequest(memoryview(r.records), r.columns, r.topics, r.tags, r.keys)
             for r in (first, second)]
    merged = merge(views)
    assert bytes(merged.records) == bytes(first.records) + bytes(second.records)
    assert merged.topics == ["A", "B"] and merged.tags == ["T"]
    assert len(merged.keys) == 3
    assert merged.keys.strings() == tuple(a + b for a, b in zip(first.keys.strings(), second.keys.strings(),
                                                                strict=True))


def test_requests_with_one_table_are_joined_as_they_are_and_a_stray_tag_is_still_refused() -> None:
    """Batches of one producer to one topic share their tables: merged without remapping, so an index
    outside them is left for check to refuse, and the writer then takes the round apart."""
    first, second = _request(b"x" * 10), _request(b"y" * 20, b"z")
    merged = merge([first, second])
    assert merged.columns == first.columns + second.columns
    assert merged.topics == ["A"] and merged.tags == ["T"] and len(merged.keys) == 3
    rows = np.frombuffer(second.columns, COLUMNS).copy()
    rows["tag"][0] = 5
    stray = EncodedRequest(second.records, rows.tobytes(), second.topics, second.tags, second.keys)
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


TOPIC_POOL = ("A", "B", "C", "bad topic")  # the last is refused by the topic rule
TAG_POOL = ("T", "U", "V")


@st.composite
def requests(draw: st.DrawFn, valid: bool) -> EncodedRequest:
    """A request's columns and tables; with ``valid`` False, table indices may fall outside them."""
    topics = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=3, unique=True))
    tags = draw(st.lists(st.sampled_from(TAG_POOL), max_size=3, unique=True))
    slack = 0 if valid else 1
    rows = np.zeros(draw(st.integers(0 if not valid else 1, 6)), COLUMNS)
    writer_picks = draw(st.booleans())
    for row in rows:
        row["topic"] = draw(st.integers(0, len(topics) - 1 + slack))
        row["tag"] = draw(st.integers(-1 - slack, len(tags) - 1 + slack))
        row["queue"] = QUEUE_ROUND_ROBIN if writer_picks else draw(st.sampled_from([-3, -2, -1, 0, 1, 3, 5]))
        row["shard"] = draw(st.integers(-(1 << 31), (1 << 31) - 1))
    keys = KeyText.of(["u"] * len(rows), ["k"] * len(rows))
    return EncodedRequest(b"r" * len(rows), rows.tobytes(), topics, tags, keys)


def _outcome(call: Callable[[], EncodedRequest | np.ndarray]) -> object:
    try:
        out = call()
    except (BatchError, IndexError):  # the writer takes either as the round's refusal
        return "refused"
    if isinstance(out, np.ndarray):
        return out.tolist()
    return bytes(out.records), out.columns, out.topics, out.tags, out.keys.strings()


@settings(max_examples=300, deadline=None)
@given(batch=st.lists(requests(valid=False), min_size=1, max_size=4))
def test_merge_remaps_a_round_at_once_as_the_request_by_request_merge_did(batch: list[EncodedRequest]) -> None:
    assert _outcome(lambda: merge(batch)) == _outcome(lambda: oracle.merge(batch))


@settings(max_examples=300, deadline=None)
@given(request=requests(valid=True), queues=st.integers(1, 4), earlier=st.lists(st.sampled_from("ABC"), max_size=4))
def test_pick_queues_groups_rows_by_topic_as_the_topic_by_topic_pick_did(
        tmp_path_factory: pytest.TempPathFactory, request: EncodedRequest, queues: int, earlier: list[str]) -> None:
    """The same queue ids, the same refusals, and the round-robin turns left where they were left."""
    picks = []
    for pick in (pick_queues, oracle.pick_queues):
        table = TopicTable.load(tmp_path_factory.mktemp("topics"), lambda: 0, deferred=True)
        robin = RoundRobin()
        for name in earlier:
            robin.turns(name, 7, 1)
        checked = CheckedBatch(np.frombuffer(request.columns, COLUMNS), *(np.zeros(0, np.int64),) * 3)
        picks.append((_outcome(lambda: pick(request, checked, table, queues, robin)),  # noqa: B023
                      [robin.turns(name, 1 << 20, 1).tolist() for name in TOPIC_POOL],
                      sorted(table.topics)))
    assert picks[0] == picks[1]


def test_a_request_whose_key_text_does_not_hold_together_is_refused_in_the_merge_and_alone() -> None:
    """Key bounds that leave their text, or count other records: the round's merge refuses it (the
    writer then takes the round apart) and ``check`` refuses it alone, each as a BatchError."""
    good, bad = _request(b"x"), _request(b"y", b"z")
    config = StoreConfig(store_host=Host("10.0.0.7", 10911))
    for bounds in ([0, 1, 70, 71, 72], [0, 32, 32]):  # past its 64 bytes; one record of two
        torn = EncodedRequest(bad.records, bad.columns, bad.topics, bad.tags,
                              KeyText(bad.keys.text, np.array(bounds, "<i4")))
        with pytest.raises(BatchError, match=r"(?i)key"):
            check(merge([good, torn]), config, 100)
        with pytest.raises(BatchError, match=r"(?i)key"):
            check(torn, config, 100)
