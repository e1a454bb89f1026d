"""The writer's plan for producer-encoded batches: merging a poll round's requests, picking their queues
(held to the request-by-request and topic-by-topic versions, tests/oracle/plan.py), cutting its replies."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import StoreConfig
from mqstore.engine.batch.key_text import KeyText
from mqstore.engine.batch.record_batch import COLUMNS, QUEUE_ROUND_ROBIN, BatchError, BatchOutcome, CheckedBatch
from mqstore.engine.log.host import Host
from mqstore.engine.log.message import PutStatus
from mqstore.engine.meta.topics import TopicTable
from mqstore.engine.put.plan import EncodedRequest, check, merge, pick_queues, reply_rows_each, written_rows
from mqstore.engine.put.queue_selector import RoundRobin
from mqstore.ipc.wire.encoded import BatchEncoder, Encoding
from mqstore.ipc.wire.messages import Outgoing
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


@st.composite
def written_batches(draw: st.DrawFn) -> tuple[EncodedRequest, CheckedBatch, np.ndarray, BatchOutcome]:
    """A checked batch, its queue ids, and an outcome that wrote all of it or a first part."""
    tags = draw(st.lists(st.sampled_from(TAG_POOL), max_size=3, unique=True))
    n = draw(st.integers(0, 8))
    rows = np.zeros(n, COLUMNS)
    ints = st.integers(-(1 << 31), (1 << 31) - 1)
    for row in rows:
        row["size"] = draw(ints)
        row["topic"] = draw(st.integers(0, 2))
        row["tag"] = draw(st.integers(-1, len(tags) - 1))
    longs = st.integers(-(1 << 63), (1 << 63) - 1)
    written = draw(st.integers(0, n))
    outcome = BatchOutcome(np.array(draw(st.lists(longs, min_size=written, max_size=written)), np.int64),
                           np.array(draw(st.lists(longs, min_size=written, max_size=written)), np.int64),
                           draw(longs), (PutStatus.PUT_OK, ""))
    sys_flags = np.array(draw(st.lists(ints, min_size=n, max_size=n)), np.int64)
    queue_ids = np.array(draw(st.lists(st.integers(0, (1 << 31) - 1), min_size=n, max_size=n)), np.int64)
    request = EncodedRequest(b"", rows.tobytes(), ["A", "B", "C"], tags, KeyText.of([f"u{i}" for i in range(n)],
                                                                                      ["k"] * n))
    return request, CheckedBatch(rows, np.zeros(n, np.int64), np.zeros(n, np.int64), sys_flags), queue_ids, outcome


@settings(max_examples=300, deadline=None)
@given(batch=written_batches(), cuts=st.lists(st.integers(0, 8), max_size=4))
def test_written_rows_are_the_dispatch_and_reply_rows_numpy_wrote(
        batch: tuple[EncodedRequest, CheckedBatch, np.ndarray, BatchOutcome], cuts: list[int]) -> None:
    """One kernel call writes both, byte for byte the columns numpy assigned one by one (tests/oracle/plan.py),
    and a round's replies cut by request are each request's rows, whatever the append wrote before it stopped."""
    request, checked, queue_ids, outcome = batch
    dispatched, replies = written_rows(request, checked, queue_ids, outcome)
    want = oracle.dispatch_batch(request, checked, queue_ids, outcome)
    assert dispatched.columns.tobytes() == want.columns.tobytes()
    assert (dispatched.topics, dispatched.keys.strings()) == (want.topics, want.keys.strings())
    assert replies == oracle.reply_rows(queue_ids, outcome)
    counts = [*cuts, len(queue_ids)]
    starts = np.cumsum([0, *counts[:-1]]).tolist()
    assert reply_rows_each(replies, counts) == [oracle.reply_rows(queue_ids, outcome, start, start + count)
                                                for start, count in zip(starts, counts, strict=True)]


def test_written_rows_refuse_a_tag_outside_the_table() -> None:
    """Stricter than numpy's indexing, which wraps a tag from -2 down and reads the trailing 0 for the
    table's length: ``check`` refuses those batches before any write, the kernel refuses them too."""
    request, checked, queue_ids, outcome = _one_written(tag=5)
    with pytest.raises(IndexError):
        oracle.dispatch_batch(request, checked, queue_ids, outcome)
    for tag in (5, 1, -2):
        request, checked, queue_ids, outcome = _one_written(tag=tag)
        with pytest.raises(ValueError, match="tag outside"):
            written_rows(request, checked, queue_ids, outcome)
    request, checked, queue_ids, outcome = _one_written(tag=0)
    with pytest.raises(ValueError, match="must be the batch's rows"):
        written_rows(request, checked, queue_ids[:0], outcome)


def _one_written(tag: int) -> tuple[EncodedRequest, CheckedBatch, np.ndarray, BatchOutcome]:
    rows = np.zeros(1, COLUMNS)
    rows["tag"] = tag
    request = EncodedRequest(b"", rows.tobytes(), ["A"], ["T"], KeyText.of(["u"], [""]))
    outcome = BatchOutcome(np.zeros(1, np.int64), np.zeros(1, np.int64), 5, (PutStatus.PUT_OK, ""))
    return request, CheckedBatch(rows, *(np.zeros(1, np.int64),) * 3), np.zeros(1, np.int64), outcome


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
