"""The compiled batch kernels (engine/csrc/batch.c, encode.c) held to the numpy code they replaced
(tests/oracle/record_batch.py, writer.py): the same verdict and reason for every batch, hostile ones
included, the same bytes stamped and encoded, the same queue offsets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import Host
from mqstore.engine.batch import record_batch
from mqstore.engine.batch.record_batch import COLUMNS, BatchError, CheckedBatch, PropertyPieces, encode_one
from mqstore.engine.log import commitlog
from mqstore.engine.log.record import decode_record, encode_properties
from mqstore.engine.put.writer import CommitLogWriter
from tests.oracle import record_batch as oracle
from tests.oracle import writer as writer_oracle

STORES = (Host("10.0.0.7", 10911), Host("fe80::7", 10911), Host("10.0.0.7", 256))
BORN_V6 = Host("fe80::1", 4242)
TOPICS = ("A", "Topic_B", "T" * 127, "L" * 128, "W" * 300)  # the last two take MAGIC_V2's two-byte length


@st.composite
def batches(draw: st.DrawFn, names: tuple[str, ...] = ("TAGS", "KEYS", "UNIQ_KEY", "p")
            ) -> tuple[bytes, bytes, list[str], Host, bool]:
    """A well-formed batch: records as a producer encodes them, their columns and topic table."""
    store = draw(st.sampled_from(STORES))
    prop_crc = draw(st.booleans())
    count = draw(st.integers(1, 12))
    table = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True))
    records, rows = [], np.zeros(count, COLUMNS)
    for i in range(count):
        topic_id = draw(st.integers(0, len(table) - 1))
        props = draw(st.dictionaries(st.sampled_from(names),
                                     st.text("abc xyz", max_size=8)))
        record = encode_one(table[topic_id], draw(st.binary(max_size=200)), props, draw(st.integers(0, 7)),
                            draw(st.integers(-3, 3)), draw(st.sampled_from([0, 1, 2, 3])),
                            draw(st.integers(0, 1 << 45)), BORN_V6 if draw(st.booleans()) else store, store,
                            draw(st.integers(0, 3)), prop_crc)
        records.append(record)
        rows[i] = (len(record), topic_id, -1, 0, -1)
    return b"".join(records), rows.tobytes(), table, store, prop_crc


def verdict(check: object, records: bytes, columns: bytes, topics: list[str], store: Host, prop_crc: bool,
            max_body_bytes: int) -> tuple[str, list[int], list[int], list[int]]:
    try:
        checked: CheckedBatch = check(records, columns, topics, store_host=store,  # type: ignore[operator]
                                      prop_crc=prop_crc, max_body_bytes=max_body_bytes)
    except BatchError as exc:
        return str(exc), [], [], []
    return "ok", checked.starts.tolist(), checked.store_ms_pos.tolist(), checked.sys_flags.tolist()


def same_verdict(records: bytes, columns: bytes, topics: list[str], store: Host, prop_crc: bool,
                 max_body_bytes: int = 1 << 20) -> str:
    args = (records, columns, topics, store, prop_crc, max_body_bytes)
    kernel, expected = verdict(record_batch.check_batch, *args), verdict(oracle.check_batch, *args)
    assert kernel == expected
    return kernel[0]


@settings(max_examples=200, deadline=None)
@given(batches())
def test_a_well_formed_batch_passes_with_the_oracles_columns(batch: tuple[bytes, bytes, list[str], Host, bool]) -> None:
    assert same_verdict(*batch) == "ok"


SEND_ONLY_NAMES = ("TAGS", "DELAY", "TRAN_MSG", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_",
                   "TIMER_DELAY", "DELAYS", "TRAN")


@settings(max_examples=200, deadline=None)
@given(batches(SEND_ONLY_NAMES))
def test_a_record_with_a_send_only_property_is_refused_like_the_oracle(
        batch: tuple[bytes, bytes, list[str], Host, bool]) -> None:
    """Delayed, transactional and timer messages take the send path, whose put rules store them where
    they wait; "TIMER_", "TIMER_DELAY", "DELAYS" and "TRAN" are no such property."""
    records, pos, held = batch[0], 0, False
    while pos < len(records):  # the generated records are whole: each one's properties as the decoder keeps them
        r = decode_record(records, pos, check_crc=False).record
        assert r is not None
        held = held or any(name in r.properties for name in record_batch.SEND_ONLY_PROPERTIES)
        pos += r.size
    assert (same_verdict(*batch) == record_batch.SEND_ONLY_REFUSAL) == held


@settings(max_examples=400, deadline=None)
@given(batches(), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=3))
def test_flipped_bytes_get_the_oracles_verdict(batch: tuple[bytes, bytes, list[str], Host, bool],
                                               flips: list[tuple[int, int]]) -> None:
    records, columns, topics, store, prop_crc = batch
    damaged = bytearray(records)
    for at, value in flips:
        damaged[at % len(damaged)] = value
    same_verdict(bytes(damaged), columns, topics, store, prop_crc)


@settings(max_examples=300, deadline=None)
@given(batches(), st.data())
def test_hostile_columns_and_tables_get_the_oracles_verdict(batch: tuple[bytes, bytes, list[str], Host, bool],
                                                            data: st.DataObject) -> None:
    records, columns, topics, store, prop_crc = batch
    rows = np.frombuffer(columns, COLUMNS).copy()
    how = data.draw(st.sampled_from(["size", "topic", "truncate", "cut_columns", "table", "store", "body_limit",
                                     "no_crc", "other_topic"]))
    max_body = 1 << 20
    i = data.draw(st.integers(0, len(rows) - 1))
    if how == "size":
        rows["size"][i] += data.draw(st.integers(-200, 200))
    elif how == "topic":
        rows["topic"][i] = data.draw(st.integers(0, 4))
    elif how == "truncate":
        records = records[:data.draw(st.integers(0, len(records)))]
    elif how == "cut_columns":
        columns = columns[:data.draw(st.integers(0, len(columns)))]
    elif how == "table":
        topics = data.draw(st.lists(st.sampled_from(TOPICS), max_size=3))
    elif how == "store":
        store = data.draw(st.sampled_from(STORES))
    elif how == "body_limit":
        max_body = data.draw(st.integers(0, 200))
    elif how == "no_crc":
        prop_crc = not prop_crc
    elif how == "other_topic":
        topics = [t[:-1] + "x" for t in topics]
    same_verdict(records, columns if how == "cut_columns" else rows.tobytes(), topics, store, prop_crc, max_body)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=84, max_size=600), st.lists(st.integers(-5, 700), min_size=1, max_size=6),
       st.sampled_from(STORES), st.booleans())
def test_random_bytes_get_the_oracles_verdict(records: bytes, sizes: list[int], store: Host, prop_crc: bool) -> None:
    rows = np.zeros(len(sizes), COLUMNS)
    rows["size"] = sizes
    rows["size"][-1] = len(records) - sum(sizes[:-1])  # mostly adding up, so the record checks run
    same_verdict(records, rows.tobytes(), ["A", "W" * 300], store, prop_crc)


def test_a_wrong_topic_names_the_lowest_topic_index_like_the_oracle() -> None:
    props = encode_properties({})
    store = STORES[0]
    records = [encode_one(t, b"x", {}, 0, 0, 0, 1, store, store, 0, False) for t in ("A", "B", "A")]
    rows = np.zeros(3, COLUMNS)
    rows["size"] = [len(r) for r in records]
    rows["topic"] = [1, 0, 1]  # every record under the other topic
    assert props == b""
    assert same_verdict(b"".join(records), rows.tobytes(), ["A", "B"], store, False) == "a record's topic is not 'A'"


@settings(max_examples=200, deadline=None)
@given(batches(), st.data())
def test_the_stamp_writes_the_oracles_bytes(batch: tuple[bytes, bytes, list[str], Host, bool],
                                            data: st.DataObject) -> None:
    records, columns, topics, store, prop_crc = batch
    checked = record_batch.check_batch(records, columns, topics, store_host=store, prop_crc=prop_crc,
                                       max_body_bytes=1 << 20)
    n = len(checked.starts)
    lead = data.draw(st.integers(0, 64))
    ints = st.integers(-(1 << 40), 1 << 40)
    queue_ids, queue_offsets, phys = (np.array(data.draw(st.lists(ints, min_size=n, max_size=n)), np.int64)
                                      for _ in range(3))
    store_ms = data.draw(st.integers(-(1 << 62), 1 << 62))
    sizes = checked.columns["size"].astype(np.int64)
    files = [np.frombuffer(bytes(lead) + records + bytes(16), np.uint8).copy() for _ in range(2)]
    for stamp, buf in zip((commitlog.stamp_batch, oracle.stamp_batch), files, strict=True):
        stamp(buf, checked.starts + lead, sizes, checked.store_ms_pos, queue_ids, queue_offsets, phys, store_ms,
              prop_crc)
    assert files[0].tobytes() == files[1].tobytes()


@pytest.mark.parametrize(("start", "size", "oracle_refuses"), [(150, 84, True), (0, 200, False), (-1, 100, False)])
def test_a_record_outside_the_file_is_not_stamped(start: int, size: int, oracle_refuses: bool) -> None:
    """Where the oracle's scatter lands past the file it refuses too; a record whose tail alone leaves
    the file, or a negative start (numpy wraps it), only the kernel refuses, before writing a byte."""
    buf = np.zeros(200, np.uint8)
    one = np.array([1], np.int64)
    args = (np.array([start], np.int64), np.array([size + 1], np.int64), np.array([56], np.int64), one, one, one, 5,
            True)
    with pytest.raises(ValueError, match="leaves the 200-byte buffer"):
        commitlog.stamp_batch(buf, *args)
    assert not buf.any()
    if oracle_refuses:
        with pytest.raises(IndexError):
            oracle.stamp_batch(buf, *args)


def test_arguments_that_do_not_fit_are_refused_as_malformed() -> None:
    from mqstore.engine import _native
    out = np.empty(3, np.int64)
    with pytest.raises(ValueError, match="8 or 20 bytes"):
        _native.check_batch(b"", bytes(18), b"", np.zeros(1, np.int64), b"abc", False, 10, out)
    with pytest.raises(ValueError, match="not 3 per record"):
        _native.check_batch(b"", bytes(18), b"", np.zeros(1, np.int64), bytes(8), False, 10, out[:2])
    with pytest.raises(ValueError, match="rise within the parts"):
        _native.check_batch(b"", bytes(18), b"ab", np.array([3], np.int64), bytes(8), False, 10, out)
    with pytest.raises(ValueError, match="differ in length"):
        _native.stamp_batch(bytearray(100), *(np.zeros(1, np.int64),) * 5, np.zeros(2, np.int64), 0, False)
    with pytest.raises(ValueError, match="not 4 per record"):
        _native.group_ranks(np.zeros(3, np.int64), np.zeros(11, np.int64))


@st.composite
def encode_args(draw: st.DrawFn) -> tuple[tuple[list[bytes], list[str], list[bytes]], dict[str, object]]:
    """encode_batch's inputs: columns given as lists or as one int, born hosts of either family or none."""
    n = draw(st.integers(0, 10))
    column = st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=n, max_size=n)
    born = st.sampled_from([h.packed for h in (*STORES, BORN_V6)])
    kwargs: dict[str, object] = {
        "store_host": draw(st.sampled_from(STORES)), "prop_crc": draw(st.booleans()),
        "born_ms": draw(st.integers(-(1 << 63), (1 << 63) - 1) | st.lists(st.integers(0, 1 << 50), min_size=n,
                                                                              max_size=n)),
        "born_hosts": draw(st.none() | st.lists(born, min_size=n, max_size=n)),
        "queue_ids": draw(st.integers(0, 7) | column), "flags": draw(st.integers(-3, 3) | column),
        "sys_flags": draw(st.integers(0, 0x3F) | column), "reconsume_times": draw(st.integers(0, 3) | column)}
    bodies = draw(st.lists(st.binary(max_size=300), min_size=n, max_size=n))
    topics = draw(st.lists(st.sampled_from(TOPICS), min_size=n, max_size=n))
    props = draw(st.lists(st.binary(max_size=40) | st.just(b"p" * 32750), min_size=n, max_size=n))
    return (bodies, topics, props), kwargs


def encoded(encode: object, args: tuple[list[bytes], list[str], list[bytes]], kwargs: dict[str, object]
            ) -> tuple[bytes, list[int]] | str:
    try:
        records, sizes = encode(*args, **kwargs)  # type: ignore[operator]
    except (ValueError, OverflowError) as exc:
        return type(exc).__name__
    return records, sizes.tolist()


@settings(max_examples=300, deadline=None)
@given(encode_args())
def test_the_encoder_writes_the_oracles_records(case: tuple[tuple[list[bytes], list[str], list[bytes]],
                                                            dict[str, object]]) -> None:
    args, kwargs = case
    assert encoded(record_batch.encode_batch, args, kwargs) == encoded(oracle.encode_batch, args, kwargs)


@pytest.mark.parametrize(("field", "value"), [("queue_ids", 1 << 31), ("flags", [-(1 << 31) - 1]),
                                              ("reconsume_times", [1 << 40])])
def test_an_int32_field_out_of_range_is_refused_like_the_oracle(field: str, value: object) -> None:
    kwargs = {"store_host": STORES[0], "prop_crc": True, "born_ms": 5, field: value}
    for encode in (record_batch.encode_batch, oracle.encode_batch):
        with pytest.raises(OverflowError):
            encode([b"body"], ["A"], [b""], **kwargs)  # type: ignore[operator]


def test_a_column_that_is_not_bytes_is_refused() -> None:
    with pytest.raises(TypeError, match="bodies must be bytes"):
        record_batch.encode_batch(["body"], ["A"], [b""], store_host=STORES[0], prop_crc=False,  # type: ignore[list-item]
                                  born_ms=5)
    with pytest.raises(ValueError, match="2 properties for 1 bodies"):
        record_batch.encode_batch([b"body"], ["A"], [b"", b""], store_host=STORES[0], prop_crc=False, born_ms=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, (1 << 31) - 1) | st.integers(0, 5)), max_size=200),
       st.dictionaries(st.tuples(st.sampled_from(["A", "B", "C"]), st.integers(0, 5)), st.integers(0, 1 << 40)))
def test_queue_offsets_count_on_per_queue_like_the_oracle(rows: list[tuple[int, int]],
                                                          known: dict[tuple[str, int], int]) -> None:
    topic_ids = np.array([t for t, _ in rows], np.uint16)
    queue_ids = np.array([q for _, q in rows], np.int64)
    writer = CommitLogWriter.__new__(CommitLogWriter)
    writer.next_queue_offsets = dict(known)
    expected_next = dict(known)
    expected = writer_oracle.assign_queue_offsets(expected_next, topic_ids, queue_ids, ["A", "B", "C"])
    got, groups, group_of = writer.assign_queue_offsets(topic_ids, queue_ids, ["A", "B", "C"])
    assert got.tolist() == expected.tolist()
    assert writer.next_queue_offsets == expected_next
    assert [name for name, _ in groups] == list(dict.fromkeys(zip([["A", "B", "C"][t] for t, _ in rows],
                                                                  queue_ids.tolist(), strict=True)))
    assert len(group_of) == len(rows)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 8).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.text("aé\x01 ", max_size=6) | st.binary(max_size=6)
                         | st.lists(st.text("bü\x02", max_size=5) | st.binary(max_size=5), min_size=n, max_size=n),
                         min_size=1, max_size=5))), st.booleans())
def test_properties_given_as_pieces_are_joined_as_the_oracle_joins_them(
        case: tuple[int, list[str | bytes | list[str | bytes]]], prop_crc: bool) -> None:
    n, columns = case
    args = ([b"body%d" % i for i in range(n)], ["A"] * n, PropertyPieces(tuple(columns)))
    kwargs: dict[str, object] = {"store_host": STORES[0], "prop_crc": prop_crc, "born_ms": 5}
    assert encoded(record_batch.encode_batch, args, kwargs) == encoded(oracle.encode_batch, args, kwargs)  # type: ignore[arg-type]


def test_property_columns_that_do_not_fit_are_refused() -> None:
    kwargs: dict[str, object] = {"store_host": STORES[0], "prop_crc": False, "born_ms": 5}
    with pytest.raises(ValueError, match="1 properties for 2 bodies"):
        record_batch.encode_batch([b"a", b"b"], ["A", "A"], PropertyPieces((["x"],)), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes or str"):
        record_batch.encode_batch([b"a"], ["A"], PropertyPieces(([7],)), **kwargs)  # type: ignore[arg-type, list-item]
    with pytest.raises(ValueError, match="1 to 8 columns"):
        record_batch.encode_batch([b"a"], ["A"], PropertyPieces(("x",) * 9), **kwargs)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 12).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, (1 << 31) - 1), min_size=n, max_size=n),
    *(st.integers(lo, hi) | st.lists(st.integers(lo, hi), min_size=n, max_size=n)
      for lo, hi in ((0, 0xFFFF), (-(1 << 31), (1 << 31) - 1), (-(1 << 31), (1 << 31) - 1), (-1, 1 << 20))))))
def test_columns_are_packed_as_the_oracle_packs_them(case: tuple[list[int], Any, Any, Any, Any]) -> None:
    sizes, topic, queue, shard, tag = case
    columns = {"topic": topic, "queue": queue, "shard": shard, "tag": tag}
    packed = record_batch.pack_columns(np.array(sizes, np.int64), **columns)
    assert packed == oracle.pack_columns(np.array(sizes, np.int64), **columns)


def test_a_column_value_outside_its_field_or_a_column_of_another_length_is_refused() -> None:
    sizes = np.array([10, 20], np.int64)
    with pytest.raises(OverflowError, match="topic"):
        record_batch.pack_columns(sizes, topic=1 << 16, queue=0, shard=0, tag=0)
    with pytest.raises(OverflowError, match="tag"):
        record_batch.pack_columns(sizes, topic=0, queue=0, shard=0, tag=[0, 1 << 31])
    with pytest.raises(ValueError, match="3 queue values for 2 records"):
        record_batch.pack_columns(sizes, topic=0, queue=[0, 1, 2], shard=0, tag=0)
    with pytest.raises(OverflowError, match="size"):
        record_batch.pack_columns(np.array([-1], np.int64), topic=0, queue=0, shard=0, tag=0)
    with pytest.raises(TypeError):
        record_batch.pack_columns(sizes, topic=0, queue=0, shard=0, tag=["x", "y"])


def test_a_send_only_name_with_an_empty_value_is_no_send_only_property() -> None:
    """record.h's one properties rule (RocketMQ's string2messageProperties, decode_properties): a segment
    with an empty value is no property, so ``DELAY\\x01\\x02`` asks for no delay and the batch passes; the
    kernel once refused it by its name alone."""
    store = STORES[0]
    record = encode_one("A", b"body", {"DELAY": "", "TAGS": "t"}, 0, 0, 0, 1, store, store, 0, False)
    decoded = decode_record(record, check_crc=False).record
    assert b"DELAY\x01\x02" in record and decoded is not None and "DELAY" not in decoded.properties
    rows = np.zeros(1, COLUMNS)
    rows[0] = (len(record), 0, -1, 0, -1)
    assert same_verdict(record, rows.tobytes(), ["A"], store, False) == "ok"
