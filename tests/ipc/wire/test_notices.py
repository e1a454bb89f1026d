"""Notices round-trip, keep the wire maps actors have always sent, and refuse anything else with
SchemaError: never another exception a subscriber would not catch."""

from __future__ import annotations

import contextlib
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine.batch.dispatch import DISPATCH_COLUMNS, DispatchBatch, DispatchRequest
from mqstore.engine.batch.key_text import KeyText
from mqstore.ipc.wire import schema
from mqstore.ipc.wire.notices import Arrived, Dispatch, Flushed, Indexed, Tick, TopicDeleted, Written

LONG_MAX = 2**63 - 1
offsets = st.integers(0, LONG_MAX)
topics = st.from_regex(r"[a-zA-Z0-9_%|-]{1,20}", fullmatch=True)
strings = st.text(max_size=12)
wire_ints = st.integers(-(2**63), 2**64 - 1)  # what msgpack carries
NOTICES = (Tick, Written, Flushed, Dispatch, Arrived, Indexed, TopicDeleted)


@st.composite
def dispatch_batches(draw: st.DrawFn) -> DispatchBatch:
    names = draw(st.lists(topics, min_size=1, max_size=3, unique=True))
    count = draw(st.integers(0, 6))
    requests = [DispatchRequest(draw(st.sampled_from(names)), draw(st.integers(0, 7)), phys, 100,
                                draw(st.integers(-(2**63), LONG_MAX)),
                                draw(st.integers(0, LONG_MAX)), draw(st.integers(0, 1000)),
                                tuple(draw(st.lists(st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True), max_size=2))),
                                draw(st.one_of(st.none(), st.from_regex(r"[A-F0-9]{8}", fullmatch=True))), 0)
                for phys in range(0, 100 * count, 100)]
    return DispatchBatch.from_requests(requests) if requests else DispatchBatch(
        np.empty(0, DISPATCH_COLUMNS), names, KeyText.of([], []))


notices = st.one_of(
    st.builds(Tick, offsets),
    st.builds(Written, offsets, offsets, st.booleans()),
    st.builds(Flushed, offsets),
    st.builds(Arrived, st.lists(st.tuples(topics, st.integers(0, 2**31 - 1), offsets), max_size=5).map(tuple),
              offsets, offsets, offsets, offsets),
    st.builds(Indexed, st.lists(st.from_regex(r"[0-9]{17}", fullmatch=True), max_size=3).map(tuple), offsets, offsets,
              offsets, offsets),
    st.builds(TopicDeleted, topics, offsets),
)


def _same_dispatch(a: Dispatch, b: Dispatch) -> None:
    assert (a.from_phys, a.to_phys) == (b.from_phys, b.to_phys)
    assert a.batch.columns.tobytes() == b.batch.columns.tobytes()
    assert (a.batch.topics, a.batch.keys.strings()) == (b.batch.topics, b.batch.keys.strings())
    assert a.batch.keys.wire() == b.batch.keys.wire()


@given(notices)
def test_every_notice_round_trips(notice: Tick | Written | Flushed | Arrived | Indexed | TopicDeleted) -> None:
    frames = notice.frames()
    assert frames[0] == type(notice).TOPIC
    assert type(notice).decode(frames[1]) == notice
    assert type(notice).decode(memoryview(frames[1])) == notice


def _received(notice: Dispatch) -> tuple[bytes, list[memoryview]]:
    """The map and the frames after it, as a subscriber receives them (bytes, then buffers)."""
    frames = notice.frames()
    assert frames[0] == schema.DISPATCH
    return bytes(frames[1]), [memoryview(bytes(f)) for f in frames[2:]]


@given(dispatch_batches(), offsets, offsets)
def test_dispatch_round_trips(batch: DispatchBatch, from_phys: int, to_phys: int) -> None:
    notice = Dispatch(from_phys, to_phys, batch)
    header, parts = _received(notice)
    _same_dispatch(Dispatch.decode(header, parts), notice)
    without = Dispatch.decode(header, parts, keys=False)  # a builder that reads no keys: the rest alike
    assert without.batch.keys is None
    assert without.batch.columns.tobytes() == batch.columns.tobytes() and without.batch.topics == batch.topics


@given(dispatch_batches())
def test_a_dispatch_batch_is_read_in_place(batch: DispatchBatch) -> None:
    """The columns and key bounds decoded are views of the frames received, not copies of them."""
    header, parts = _received(Dispatch(0, 1, batch))
    decoded = Dispatch.decode(header, parts).batch
    assert decoded.keys is not None
    for array, part in ((decoded.columns, parts[0]), (decoded.keys.bounds, parts[2])):
        assert len(part) == 0 or np.shares_memory(array, np.frombuffer(part, np.uint8))


def test_wire_maps_are_those_actors_sent_before_the_notices_were_typed() -> None:
    """Byte for byte: a mixed deployment (or a replayed frame) reads the same maps."""
    pack = schema.pack
    assert Tick(7).frames() == [b"tick", pack({"v": 1, "end": 7})]
    assert Written(9, 1_700_000_000_000, True).frames() == [
        b"written", pack({"v": 1, "end": 9, "store_ms": 1_700_000_000_000, "sync": True})]
    assert Flushed(5).frames() == [b"flushed", pack({"v": 1, "end": 5})]
    # a builder's notices are numbered since (epoch, seq): maps without them read as unnumbered
    assert Arrived((("T", 1, 3), ("U", 0, 8)), 400, 12, 77, 5).frames() == [
        b"arrived", pack({"v": 1, "queues": [["T", 1, 3], ["U", 0, 8]], "applied": 400, "store_ms": 12,
                          "epoch": 77, "seq": 5})]
    assert Indexed(("20240101000000000",), 400, 12, 77, 5).frames() == [
        b"indexed", pack({"v": 1, "files": ["20240101000000000"], "applied": 400, "store_ms": 12,
                          "epoch": 77, "seq": 5})]
    batch = DispatchBatch.from_requests([DispatchRequest("T", 1, 0, 100, 5, 12, 0, ("a", "b"), "U1", 0),
                                         DispatchRequest("U", 0, 100, 90, 6, 13, 4, (), None, 0)])
    # a map, then the columns, the keys as key text (mqstore.engine.batch.key_text: the records' UNIQ_KEY and KEYS
    # in turn) and its bounds, each a frame of its own
    assert [bytes(f) for f in Dispatch(0, 190, batch).frames()] == [b"dispatch", pack(
        {"v": 1, "from": 0, "to": 190, "topics": ["T", "U"], "count": 2, "key_bytes": 5, "parts": 3}),
        batch.columns.tobytes(), b"U1a b", np.array([0, 2, 5, 5, 5], "<i4").tobytes()]


def test_optional_fields_take_their_defaults() -> None:
    assert Written.decode(schema.pack({"v": 1, "end": 3})) == Written(3, 0, False)
    assert Arrived.decode(schema.pack({"v": 1, "queues": [], "applied": 2})) == Arrived((), 2, 0)
    assert Indexed.decode(schema.pack({"v": 1, "files": [], "applied": 2, "store_ms": None})) == Indexed((), 2, 0)


MALFORMED: list[tuple[type[Any], dict[str, Any]]] = [
    (Tick, {"v": 1}),
    (Tick, {"v": 2, "end": 1}),
    (Tick, {"v": 1, "end": -1}),
    (Tick, {"v": 1, "end": "12"}),
    (Written, {"v": 1, "end": 1, "sync": 1}),
    (Written, {"v": 1, "end": 1, "store_ms": 2**63}),
    (Flushed, {"v": 1, "end": True}),
    (Arrived, {"v": 1, "queues": [["T", 0]], "applied": 1}),
    (Arrived, {"v": 1, "queues": [["../etc", 0, 1]], "applied": 1}),
    (Arrived, {"v": 1, "queues": [["T", 0, 1], ["T", 1, 1], ["../etc", 0, 1]], "applied": 1}),
    (Arrived, {"v": 1, "queues": [[["T"], 0, 1]], "applied": 1}),
    (Arrived, {"v": 1, "queues": [[b"T", 0, 1]], "applied": 1}),
    (Arrived, {"v": 1, "queues": "T", "applied": 1}),
    (Arrived, {"v": 1, "queues": []}),
    (Indexed, {"v": 1, "files": [7], "applied": 1}),
    (Arrived, {"v": 1, "queues": [], "applied": 1, "epoch": -1}),
    (Indexed, {"v": 1, "files": [], "applied": 1, "seq": "1"}),
]  # a dispatch notice is a map and its frames: the next test changes each of them


@pytest.mark.parametrize(("kind", "message"), MALFORMED)
def test_a_malformed_map_is_a_schema_error(kind: type[Any], message: dict[str, Any]) -> None:
    with pytest.raises(schema.SchemaError):
        kind.decode(schema.pack(message))


def test_a_dispatch_batch_that_disagrees_with_itself_is_a_schema_error() -> None:
    """Key text that is not UTF-8, bounds that leave it, go back or count other records, a topic index
    past the table, a frame whose length is not what the map counts, a frame missing or one too many:
    the batch's own checks (ValueError, TypeError) come out as SchemaError."""
    batch = DispatchBatch.from_requests([DispatchRequest("T", 1, 0, 100, 5, 12, 0, ("a",), None, 0)])
    header, (cols, keys, key_bounds) = _received(Dispatch(0, 100, batch))
    good = schema.unpack_message(header, [cols, keys, key_bounds])
    del good["parts"]
    bounds = np.frombuffer(key_bounds, "<i4")
    changes: list[tuple[dict[str, Any], list[bytes | memoryview]]] = [
        ({"topics": []}, [cols, keys, key_bounds]), ({"topics": [1]}, [cols, keys, key_bounds]),
        ({"topics": "T"}, [cols, keys, key_bounds]), ({"count": 2}, [cols, keys, key_bounds]),
        ({"count": 0}, [cols, keys, key_bounds]), ({"count": -1}, [cols, keys, key_bounds]),
        ({"key_bytes": 0}, [cols, keys, key_bounds]), ({"count": "1"}, [cols, keys, key_bounds]),
        ({}, [cols[:-1], keys, key_bounds]), ({}, [bytes(cols) + b"x", keys, key_bounds]),
        ({}, [cols, b"\xff", key_bounds]), ({"key_bytes": 0}, [cols, b"", key_bounds]),
        ({}, [cols, keys, bounds[::-1].tobytes()]), ({}, [cols, keys, key_bounds[:-1]]),
        ({}, [cols, keys, np.append(bounds, 1).astype("<i4").tobytes()]), ({}, [cols, keys]),
        ({}, [cols, keys, key_bounds, b""]), ({}, [])]
    for changed, parts in changes:
        with pytest.raises(schema.SchemaError):
            Dispatch.decode(schema.pack_message({**good, **changed}, parts)[0], parts)
    for changed, parts in changes[:10]:  # what a builder that reads no keys still refuses: all but the text
        with pytest.raises(schema.SchemaError):
            Dispatch.decode(schema.pack_message({**good, **changed}, parts)[0], parts, keys=False)


@given(dispatch_batches(), st.integers(0, 3), st.data())
def test_every_truncated_dispatch_frame_is_a_schema_error(batch: DispatchBatch, which: int,
                                                          data: st.DataObject) -> None:
    """The map or any one of the three frames cut short: never a batch, never another exception."""
    header, parts = _received(Dispatch(0, 1, batch))
    frames = [header, *parts]
    if not len(frames[which]):
        return
    cut = data.draw(st.integers(0, len(frames[which]) - 1))
    frames[which] = frames[which][:cut]
    for keys in (True, False):  # unread, the key text still has the length the map says
        with pytest.raises(schema.SchemaError):
            Dispatch.decode(frames[0], frames[1:], keys=keys)


@given(st.dictionaries(st.sampled_from(["from", "to", "topics", "count", "key_bytes", "parts"]),
                       st.one_of(st.none(), st.booleans(), wire_ints, st.text(max_size=4), st.binary(max_size=8),
                                 st.lists(st.one_of(wire_ints, st.text(max_size=3)), max_size=3))),
       st.lists(st.binary(max_size=120), max_size=4))
def test_dispatch_maps_and_frames_of_any_shape_decode_or_raise_schema_errors(
        fields: dict[str, Any], parts: list[bytes]) -> None:
    for keys in (True, False):
        with contextlib.suppress(schema.SchemaError):
            assert isinstance(Dispatch.decode(schema.pack({"v": 1, **fields}), parts, keys=keys), Dispatch)


def _decoded(decode: Any, frame: bytes, parts: list[bytes], keys: bool) -> Any:
    try:
        notice = decode(frame, parts, keys=keys)
    except schema.SchemaError:
        return "refused"
    columns, text, bounds = notice.batch.wire() if keys else (notice.batch.columns.tobytes(), b"", b"")
    return notice.from_phys, notice.to_phys, notice.batch.topics, bytes(columns), bytes(text), bytes(bounds)


@given(st.dictionaries(st.sampled_from(["from", "to", "topics", "count", "key_bytes", "parts"]),
                       st.one_of(st.sampled_from([-1, 0, 1, 2, 3, 4, 3.0, True, LONG_MAX, LONG_MAX + 1, 2**64 - 1]),
                                 st.none(), wire_ints, st.text(max_size=4),
                                 st.lists(st.one_of(wire_ints, st.text(max_size=3)), max_size=3)), max_size=2),
       dispatch_batches(), st.booleans())
@settings(max_examples=400)
def test_the_inline_dispatch_decode_takes_and_refuses_what_the_field_by_field_one_does(
        changed: dict[str, Any], batch: DispatchBatch, keys: bool) -> None:
    """A well-formed map is read with its checks inline (a builder's every round); any map at all,
    a well-formed one changed in any of its fields, gives the same notice or the same refusal."""
    header, parts = _received(Dispatch(0, 100, batch))
    message = {**msgpack.unpackb(header), **changed}
    frame, frames = schema.pack(message), [bytes(p) for p in parts]
    assert _decoded(Dispatch.decode, frame, frames, keys) == _decoded(Dispatch._decode_checked, frame, frames, keys)


EDGES = [({name: value}, keys) for name in ("from", "to", "count", "key_bytes", "parts")
         for value in (-1, 0, 2, 4, LONG_MAX, LONG_MAX + 1, True, 3.0, "3", None) for keys in (True, False)] + [
    ({"topics": value}, keys) for value in ("T", None, [1], ["T", 2], {"T": 1}, []) for keys in (True, False)]


@pytest.mark.parametrize(("changed", "keys"), EDGES)
def test_the_inline_dispatch_decode_agrees_at_every_field_edge(changed: dict[str, Any], keys: bool) -> None:
    batch = DispatchBatch.from_requests([DispatchRequest("T", 1, 0, 100, 5, 12, 0, ("a",), None, 0)])
    header, parts = _received(Dispatch(0, 100, batch))
    frame, frames = schema.pack({**msgpack.unpackb(header), **changed}), [bytes(p) for p in parts]
    assert _decoded(Dispatch.decode, frame, frames, keys) == _decoded(Dispatch._decode_checked, frame, frames, keys)


@given(st.sampled_from(NOTICES), st.binary(max_size=64))
def test_garbage_frames_are_schema_errors(kind: type[Any], frame: bytes) -> None:
    with contextlib.suppress(schema.SchemaError):
        assert isinstance(kind.decode(frame), kind)


@given(st.sampled_from(NOTICES), st.dictionaries(st.sampled_from(
    ["end", "store_ms", "sync", "from", "to", "topics", "cols", "keys", "key_bounds", "queues", "files", "applied",
     "topic"]),
    st.one_of(st.none(), st.booleans(), wire_ints, st.text(max_size=4), st.binary(max_size=8),
              st.lists(st.one_of(wire_ints, st.text(max_size=3), st.lists(wire_ints, max_size=3)), max_size=3))))
def test_maps_of_any_shape_decode_or_raise_schema_errors(kind: type[Any], fields: dict[str, Any]) -> None:
    with contextlib.suppress(schema.SchemaError):
        assert isinstance(kind.decode(schema.pack({"v": 1, **fields})), kind)


@given(notices)
def test_every_truncated_prefix_is_a_schema_error(
        notice: Tick | Written | Flushed | Arrived | Indexed | TopicDeleted) -> None:
    frame = notice.encode()
    for cut in range(len(frame)):
        with pytest.raises(schema.SchemaError):
            type(notice).decode(frame[:cut])


def test_a_frame_that_is_not_a_map_is_a_schema_error() -> None:
    for kind in NOTICES:
        with pytest.raises(schema.SchemaError):
            kind.decode(msgpack.packb([1, 2, 3]))


def test_a_topic_deleted_notice_names_a_topic_the_builder_may_remove() -> None:
    """The builder removes ``consumequeue/{topic}``: a name that is a path is refused on the wire."""
    for name in ("../commitlog", "", "a/b", "."):
        with pytest.raises(schema.SchemaError):
            TopicDeleted.decode(schema.pack({"v": 1, "topic": name, "end": 0}))
