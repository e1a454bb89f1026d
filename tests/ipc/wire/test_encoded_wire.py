"""``send_encoded`` end to end without a broker: records encoded by the producer's ``BatchEncoder``,
framed as the Channel frames them (the map, then the records as a part), received as a view of a
ZeroMQ frame the way the writer receives them, checked and appended: the bytes on disk are the ones
the writer's own encoding leaves."""

from __future__ import annotations

import re
from dataclasses import fields, replace

import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.actors.writer.encoded import parse
from mqstore.engine import Geometry, Host, Message, StoreConfig
from mqstore.engine.batch.key_text import KeyText
from mqstore.engine.batch.record_batch import (
    COLUMNS,
    QUEUE_BY_SHARD,
    QUEUE_ROUND_ROBIN,
    REPLY_ROW,
    BatchOutcome,
    CheckedBatch,
    EncodedBatch,
    encode_one,
)
from mqstore.engine.log.message import PutResult, PutStatus, record_properties
from mqstore.engine.log.msgid import offset_msg_ids
from mqstore.engine.log.record import PROP_UNIQ_KEY
from mqstore.engine.put.plan import EncodedRequest, check, merge, reply_rows_each, written_rows
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.encoded import (
    OP_SEND_ENCODED,
    BatchEncoder,
    Encoding,
    EncodingError,
    SendResults,
    request_fields,
    results_from_reply,
)
from mqstore.ipc.wire.messages import Outgoing, SendResult
from mqstore.ipc.wire.replies import SendEncodedReply
from tests.engine.batch.test_record_batch import NOW_MS, STORE, reference_writer


def _received(frames: list[bytes | memoryview]) -> dict[str, object]:
    """The frames as the writer's ingress hands them on: the map copied, the parts as views of
    ZeroMQ frames (large ones wrap the sender's buffer, as a zero-copy send does)."""
    return schema.unpack_message(frames[0], [zmq.Frame(bytes(f)).buffer for f in frames[1:]])


def _body(seed: bytes, big: bool) -> bytes:
    """Small, or past ZERO_COPY_MIN_BYTES on its own (its batch goes out without a copy)."""
    return (seed or b"z") * (70_000 // max(len(seed), 1) + 1) if big else seed


outgoing = st.builds(
    lambda topic, body, tags, key, v6, flag, n, queue: Outgoing(
        topic, body, tags=tags, keys=(key,) if key else (), flag=flag, born_ms=NOW_MS - 5,
        born_host=("fe80::1", 4242) if v6 else None, reconsume_times=n, queue_id=queue,
        properties={PROP_UNIQ_KEY: f"U{len(body)}-{flag}"}),
    st.sampled_from(["A", "Topic_B", "T" * 127]), st.builds(_body, st.binary(max_size=300), st.booleans()),
    st.sampled_from([None, "TagA", "x y"]), st.sampled_from(["", "k1", "order-7"]), st.booleans(),
    st.integers(-5, 5), st.integers(0, 3), st.integers(0, 2))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(outgoing, min_size=1, max_size=12), min_size=1, max_size=3),
       prop_crc=st.booleans(), file_size=st.sampled_from([4096, 1 << 20]))
def test_send_encoded_over_the_wire_writes_the_bytes_the_writer_would(
        tmp_path_factory: pytest.TempPathFactory, batches: list[list[Outgoing]], prop_crc: bool,
        file_size: int) -> None:
    root = tmp_path_factory.mktemp("wire")
    file_size = max(file_size, 4 * max(len(m.body) for b in batches for m in b) + 8192)
    messages = [m for b in batches for m in b]
    reference = reference_writer(root / "a", file_size, prop_crc)
    expected = reference.write([Message(m.topic, m.body, tags=m.tags, keys=m.keys, properties=dict(m.properties),
                                        flag=m.flag, born_ms=m.born_ms,
                                        born_host=Host(*m.born_host) if m.born_host else None,
                                        reconsume_times=m.reconsume_times) for m in messages],
                               [m.queue_id or 0 for m in messages], NOW_MS)
    config = StoreConfig(geometry=Geometry(commitlog_file_size=file_size, prop_crc=prop_crc), store_host=STORE)
    encoder = BatchEncoder(Encoding(STORE, prop_crc, config.max_body_bytes))
    requests = []
    for i, batch in enumerate(batches):
        encoded = encoder.encode(batch)
        frames = schema.pack_message(schema.request(OP_SEND_ENCODED, i, **request_fields(encoded)), [encoded.records])
        assert len(frames) == 2 and frames[1] is encoded.records  # the records are never repacked
        requests.append(parse(_received(frames)))
    request = requests[0] if len(requests) == 1 else merge(requests)  # a poll round's requests, merged
    checked = check(request, config, 4096)
    fast = reference_writer(root / "b", file_size, prop_crc)
    queue_ids = np.asarray([m.queue_id or 0 for m in messages], np.int64)
    outcome = fast.write_batch(request.records, checked, request.topics, queue_ids, NOW_MS)
    assert outcome.phys_offsets.tolist() == [r.phys_offset for r in expected.results]
    assert outcome.queue_offsets.tolist() == [r.queue_offset for r in expected.results]
    for a, b in zip(reference.commitlog.queue.files, fast.commitlog.queue.files, strict=True):
        assert bytes(a.buffer[:a.written_pos]) == bytes(b.buffer[:b.written_pos])
    # what the builders learn, keys and UNIQ_KEYs carried as key text from the producer: the map path's requests
    dispatched, _ = written_rows(request, checked, queue_ids, outcome)
    # (but the sys flag: the map path's is the message's, the record's carries its hosts' IPv6 bits too)
    assert [replace(r, sys_flag=0) for r in dispatched.requests()] == [
        replace(r, sys_flag=0) for r in expected.requests]
    reference.commitlog.close()
    fast.commitlog.close()


@pytest.mark.parametrize(("parts", "announced", "words"), [
    (0, 1, "announces 1 part(s), 0 frame(s)"), (2, 1, "announces 1 part(s), 2 frame(s)"),
    (1, None, "announces 0 part(s), 1 frame(s)"), (1, -1, "must count the frames"), (1, True, "must count"),
    (1, "1", "must count"), (schema.MAX_PARTS + 1, schema.MAX_PARTS + 1, "must count")])
def test_a_map_must_announce_exactly_the_parts_that_follow(parts: int, announced: object, words: str) -> None:
    message = schema.request("ping", 1, **({} if announced is None else {"parts": announced}))
    with pytest.raises(schema.SchemaError, match=re.escape(words)):
        schema.unpack_message(schema.pack(message), [b"x"] * parts)


def test_parts_count_toward_the_size_limit_and_come_back_as_given() -> None:
    frames = schema.pack_message(schema.request("ping", 1), [b"a" * 10, memoryview(b"b" * 20)])
    decoded = schema.unpack_message(frames[0], frames[1:])
    assert [bytes(p) for p in decoded["parts"]] == [b"a" * 10, b"b" * 20]
    with pytest.raises(schema.SchemaError, match="exceeds the 40-byte limit"):
        schema.unpack_message(frames[0], frames[1:], max_bytes=40)
    assert "parts" not in schema.unpack_message(schema.pack(schema.request("ping", 1)))


plain = st.builds(
    lambda topic, body, tags, keys, v6, queue, shard, props: {
        "topic": topic, "body": body, "tags": tags, "keys": keys, "queue_id": queue, "shard": shard,
        "born_host": ("fe80::1", 4242) if v6 else None, "properties": props},
    st.sampled_from(["A", "Topic_B", "T" * 127]), st.binary(max_size=200), st.sampled_from([None, "", "TagA", "x y"]),
    st.sampled_from([(), ("k1",), ("", "order-7", "k2")]), st.booleans(), st.sampled_from([None, 2]),
    st.sampled_from([None, "user-9"]), st.sampled_from([{}, {}, {"TAGS": "mine", "a": "b"}]))


@settings(max_examples=60, deadline=None)
@given(messages=st.lists(plain, min_size=1, max_size=20), prop_crc=st.booleans())
def test_a_batch_encodes_each_record_as_encode_one_does_from_maps_and_from_outgoing(
        messages: list[dict[str, object]], prop_crc: bool) -> None:
    """The columnar encoder (one numpy header array, properties from templates, UNIQ_KEYs at once)
    against ``record_properties`` + ``encode_one``, record by record; maps and ``Outgoing`` alike."""
    encoder = BatchEncoder(Encoding(STORE, prop_crc, 1 << 20))
    batch = encoder.encode(messages)
    outgoing = [Outgoing(**m) for m in messages]  # type: ignore[arg-type]
    again = encoder.encode(outgoing)
    assert (again.columns, again.topics, again.tags, again.keys) == (batch.columns, batch.topics, batch.tags,
                                                                       batch.keys)
    _assert_encoded_as_encode_one(batch, outgoing, prop_crc)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.binary(max_size=200), st.sampled_from([None, "", "TagA", "x y"]),
                               st.sampled_from([(), ("k1",), ("", "order-7", "k2")])), min_size=1, max_size=20),
       topic=st.sampled_from(["A", "T" * 127]), one_tag=st.booleans(), prop_crc=st.booleans())
def test_columns_encode_what_the_same_messages_encode(rows: list[tuple[bytes, str | None, tuple[str, ...]]],
                                                      topic: str, one_tag: bool, prop_crc: bool) -> None:
    encoder = BatchEncoder(Encoding(STORE, prop_crc, 1 << 20))
    tags: str | list[str | None] = "TagA" if one_tag else [t for _, t, _ in rows]
    batch = encoder.encode_columns(topic, [b for b, _, _ in rows], tags, [k for _, _, k in rows])
    messages = [Outgoing(topic, b, "TagA" if one_tag else t, k) for b, t, k in rows]
    _assert_encoded_as_encode_one(batch, messages, prop_crc)
    with pytest.raises(ValueError, match="1 tags"):
        encoder.encode_columns(topic, [b"a", b"b"], ["T"])


def _assert_encoded_as_encode_one(batch: EncodedBatch, messages: list[Outgoing], prop_crc: bool) -> None:
    """Each record of ``batch`` is the one ``record_properties`` + ``encode_one`` give its message,
    with the UNIQ_KEY the batch chose (born time aside: the encoder's clock), and its columns say so."""
    cols = np.frombuffer(batch.columns, COLUMNS)
    pos = 0
    for m, row, uniq, keys in zip(messages, cols, batch.uniq_keys, batch.keys, strict=True):
        props = record_properties(m, uniq)
        assert isinstance(props, dict)
        expected = encode_one(m.topic, m.body, props, m.queue_id or 0, 0, 0, 0, Host(*m.born_host) if m.born_host
                              else STORE, STORE, 0, prop_crc)
        got = bytearray(batch.records[pos:pos + int(row["size"])])
        got[40:48] = bytes(8)
        assert m.born_ms is None and bytes(got) == expected
        assert batch.topics[row["topic"]] == m.topic and keys == " ".join(k for k in m.keys if k)
        assert (batch.tags[row["tag"]] if row["tag"] >= 0 else None) == (m.tags or None)
        wanted = m.queue_id if m.queue_id is not None else QUEUE_BY_SHARD if m.shard else QUEUE_ROUND_ROBIN
        assert row["queue"] == wanted
        pos += int(row["size"])
    assert pos == len(batch.records)


def test_a_map_with_an_unknown_field_is_refused_as_outgoing_refuses_it() -> None:
    encoder = BatchEncoder(Encoding(STORE, True, 1 << 20))
    with pytest.raises(TypeError):
        encoder.encode([{"topic": "A", "body": b"x", "tag": "T"}])
    with pytest.raises(TypeError):
        encoder.encode([{"body": b"x"}])


@pytest.mark.parametrize("keys", [("a b",), ("a\x01",), ("\x02",), ("ok", "a b"), ("", "a\x02")])
def test_a_key_with_a_space_or_a_separator_is_refused_alone_or_among_others(keys: tuple[str, ...]) -> None:
    """One key takes a shorter way than several (nothing to join): both refuse what
    ``record_properties`` would not store as the key itself."""
    encoder = BatchEncoder(Encoding(STORE, True, 1 << 20))
    with pytest.raises(EncodingError, match="space or a separator"):
        encoder.encode_columns("A", [b"x"], keys=[keys])
    with pytest.raises(TypeError):
        encoder.encode_columns("A", [b"x"], keys=[(b"k",)])  # type: ignore[list-item]


def test_reply_rows_the_writer_packs_are_the_results_the_producer_reads() -> None:
    """One reply-row layout: ``plan.written_rows`` of the records written, cut by request, read back by
    ``results_from_reply`` as SendResults with the PutResult's field names; the records not written
    take the reply's status."""
    batch = BatchEncoder(Encoding(STORE, False, 1 << 20)).encode([Outgoing("T", b"x%d" % i) for i in range(4)])
    outcome = BatchOutcome(np.array([4096, 4200, 4321], np.int64), np.array([7, 0, 8], np.int64), NOW_MS,
                           (PutStatus.SERVICE_NOT_AVAILABLE, "disk full"))
    request = EncodedRequest(batch.records, batch.columns, batch.topics, batch.tags,
                             KeyText.of(batch.uniq_keys, batch.keys))
    checked = CheckedBatch(np.frombuffer(batch.columns, COLUMNS), *(np.zeros(4, np.int64),) * 3)
    _, replies = written_rows(request, checked, np.array([1, 3, 1, 2], np.int64), outcome)
    packed = reply_rows_each(replies, [1, 3])[1]  # a request of three records after one of one
    assert len(packed) == 2 * REPLY_ROW.itemsize
    results = results_from_reply(SendEncodedReply(packed, "SERVICE_NOT_AVAILABLE", "disk full").encode(1),
                                 batch, STORE)
    assert [(r.status, r.phys_offset, r.queue_id, r.queue_offset) for r in results] == [
        ("PUT_OK", 4200, 3, 0), ("PUT_OK", 4321, 1, 8), ("SERVICE_NOT_AVAILABLE", -1, -1, -1),
        ("SERVICE_NOT_AVAILABLE", -1, -1, -1)]
    assert [r.msg_id for r in results[:2]] == offset_msg_ids(STORE, [4200, 4321])
    assert [r.uniq_key for r in results[:2]] == batch.uniq_keys[:2]
    # built slot by slot, they are the SendResults __init__ builds: equal, hashed alike, as frozen
    built = [SendResult(PutStatus.PUT_OK, r.msg_id, r.queue_id, r.queue_offset, r.phys_offset, r.uniq_key)
             for r in results[:2]]
    assert results[:2] == built and {hash(r) for r in results[:2]} == {hash(r) for r in built}
    with pytest.raises(AttributeError):
        results[0].status = "changed"  # type: ignore[misc]
    assert {f.name for f in fields(SendResult)} == {f.name for f in fields(PutResult)}
    with pytest.raises(ValueError, match="malformed"):
        results_from_reply(SendEncodedReply(packed[:-1], "PUT_OK", "").encode(1), batch, STORE)


def test_send_results_count_and_read_columns_without_a_result_object() -> None:
    """``SendResults`` answers ``ok_count`` and ``columns`` from the reply's rows as they came, makes
    its SendResults only when a caller touches one, and is then the list it stands for."""
    batch = BatchEncoder(Encoding(STORE, False, 1 << 20)).encode([Outgoing("T", b"x%d" % i) for i in range(3)])
    packed = np.array([(4096, 2, 7), (4200, 0, 9)], REPLY_ROW).tobytes()
    results = results_from_reply(SendEncodedReply(packed, "SERVICE_NOT_AVAILABLE", "disk full").encode(1),
                                 batch, STORE)
    assert isinstance(results, SendResults) and len(results) == 3 and results.ok_count == 2
    assert results.columns() == ([4096, 4200], [2, 0], [7, 9])
    assert results._results is None  # nothing made yet
    assert results[2] == SendResult(PutStatus.SERVICE_NOT_AVAILABLE, reason="disk full")
    assert results == list(results) and results[:2] == [r for r in results if r.ok]
    assert [r.uniq_key for r in results[:2]] == batch.uniq_keys[:2]
    refused = results_from_reply(SendEncodedReply(b"", "SERVICE_NOT_AVAILABLE", "full").encode(1), batch, STORE)
    assert refused.ok_count == 0 and [r.status for r in refused] == ["SERVICE_NOT_AVAILABLE"] * 3


@settings(max_examples=50, deadline=None)
@given(count=st.integers(1, 6), written=st.integers(0, 6),
       written_status=st.sampled_from(["PUT_OK", "FLUSH_DISK_TIMEOUT"]),
       status=st.sampled_from(["PUT_OK", "SERVICE_NOT_AVAILABLE", "MESSAGE_ILLEGAL"]))
def test_ok_count_is_the_number_of_results_that_are_ok(count: int, written: int, written_status: str,
                                                        status: str) -> None:
    batch = BatchEncoder(Encoding(STORE, False, 1 << 20)).encode([Outgoing("T", b"x")] * count)
    written = min(written, count)
    packed = np.array([(4096 + 100 * i, 0, i) for i in range(written)], REPLY_ROW).tobytes()
    results = results_from_reply(SendEncodedReply(packed, status, "why", written_status).encode(1), batch, STORE)
    assert results.ok_count == sum(r.ok for r in results) and len(results) == count
    assert [r.status for r in results] == [written_status] * written + [status] * (count - written)
