"""The packed-bodies kernel (engine/csrc/bodies.c) held to the Python loop it replaced
(tests/oracle/messages.py): the same bodies of real records, whole batches, slices and joins, and the
same refusals of damaged replies; and its arguments checked rather than trusted."""

from __future__ import annotations

import ipaddress
import string
import struct
import zlib
from array import array
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import Host, _native
from mqstore.engine.log.record import encode_record
from mqstore.ipc.wire.messages import MessageBatch, ReplyError, stored_parts
from tests.oracle import messages as oracle

TOPICS = st.one_of(st.text(string.ascii_letters, min_size=1, max_size=12),  # v1 magic
                   st.text(string.ascii_letters, min_size=128, max_size=140))  # V2 magic
HOSTS = st.one_of(st.builds(lambda a: Host(str(ipaddress.IPv4Address(a)), 9), st.integers(0, 2**32 - 1)),
                  st.builds(lambda a: Host(str(ipaddress.IPv6Address(a)), 9), st.integers(0, 2**128 - 1)))
BODIES = st.one_of(st.binary(max_size=300).map(lambda b: (b, 0)),
                   st.binary(max_size=300).map(lambda b: (zlib.compress(b), 0x1)),  # compressed
                   st.binary(max_size=40).map(lambda b: (b, 0x1)))  # marked compressed, does not inflate
RECORDS = st.lists(st.tuples(TOPICS, BODIES, st.integers(0, 0xFF).map(lambda f: f & ~0x31), HOSTS, HOSTS),
                   max_size=12)
# a damage: an int32 written at a position (a size field, a sys flag, a body length, anywhere)
DAMAGES = st.lists(st.tuples(st.floats(0, 1, exclude_max=True),
                             st.sampled_from([0, 1, 7, 8, 36, 40, 79, 80, -1, 2**31 - 1, -(2**31), 0x30])),
                   max_size=2)


def _reply(records: list[Any], damages: list[tuple[float, int]]) -> tuple[dict[str, Any], list[int], list[int]]:
    parts = [encode_record(topic=topic, body=body, properties={"TAGS": "t"}, sys_flag=flag | extra,
                           born_host=born, store_host=store)
             for topic, (body, flag), extra, born, store in records]
    data = bytearray(b"".join(parts))
    for where, value in damages:
        if len(data) >= 4:
            struct.pack_into(">i", data, int(where * (len(data) - 3)), value)
    sizes = [len(part) for part in parts]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    queue_offsets = list(range(100, 100 + len(sizes)))
    return stored_parts(bytes(data), queue_offsets, starts, sizes), starts, sizes


def _outcome(call: Any) -> Any:
    try:
        return call()
    except ReplyError as exc:  # the struct module words a too-short read its own way; the kernel its
        reason = str(exc)
        return ReplyError, reason.split(":")[0] if reason.startswith("a record too short") else reason


@settings(max_examples=400, deadline=None)
@given(records=RECORDS, damages=DAMAGES, cut=st.tuples(st.integers(0, 12), st.integers(0, 12)))
def test_bodies_are_the_oracle_s(records: list[Any], damages: list[tuple[float, int]], cut: tuple[int, int]) -> None:
    reply, starts, sizes = _reply(records, damages)
    batch = MessageBatch.from_reply(reply)
    first, stop = min(cut), max(cut)
    data = reply["parts"][0]
    assert _outcome(batch.bodies) == _outcome(lambda: oracle.bodies(data, starts, sizes))
    assert _outcome(batch[first:stop].bodies) == _outcome(
        lambda: oracle.bodies(data, starts[first:stop], sizes[first:stop]))
    for step in (2, -1, -3):  # a stepped slice, as a list's (its records copied back to back: other positions)
        stepped = _outcome(batch[::step].bodies)
        expected = _outcome(partial(oracle.bodies, data, starts[::step], sizes[::step]))
        assert stepped == expected or (stepped[0] is ReplyError and expected[0] is ReplyError)
        assert batch[::step].queue_offsets == batch.queue_offsets[::step]
    joined = MessageBatch.join([batch[:first], batch[first:stop], batch[stop:]])
    assert joined.stored_bytes == len(data) and joined.queue_offsets == batch.queue_offsets
    assert _outcome(joined.bodies) == _outcome(batch.bodies)


# records that are only their size field and random bytes: too short for a header, bodies anywhere
JUNK = st.lists(st.binary(min_size=4, max_size=120).map(lambda b: struct.pack(">i", len(b) + 4) + b), max_size=6)


@settings(max_examples=400, deadline=None)
@given(junk=JUNK)
def test_junk_records_are_refused_as_the_oracle_refuses_them(junk: list[bytes]) -> None:
    sizes = [len(record) for record in junk]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    data = b"".join(junk)
    batch = MessageBatch.from_reply(stored_parts(data, starts, starts, sizes))
    assert _outcome(batch.bodies) == _outcome(lambda: oracle.bodies(data, starts, sizes))


@settings(max_examples=300, deadline=None)
@given(records=RECORDS, damages=DAMAGES, width=st.integers(0, 12))
def test_body_heads_are_the_heads_of_the_oracle_s_bodies(records: list[Any], damages: list[tuple[float, int]],
                                                         width: int) -> None:
    reply, starts, sizes = _reply(records, damages)
    expected = _outcome(lambda: oracle.bodies(reply["parts"][0], starts, sizes))
    heads = _outcome(lambda: MessageBatch.from_reply(reply).body_heads(width))
    if isinstance(expected, list) and all(len(body) >= width for body in expected):
        assert heads == b"".join(body[:width] for body in expected)
    else:
        assert heads[0] is ReplyError


def test_a_compressed_body_s_head_is_its_inflated_body_s() -> None:
    host = Host("10.0.0.1", 9)
    parts = [encode_record(topic="T", body=body, properties={}, sys_flag=flag, born_host=host, store_host=host)
             for body, flag in [(b"plain-01", 0), (zlib.compress(b"inflated" * 9), 0x1), (zlib.compress(b"x"), 0x1)]]
    sizes = [len(part) for part in parts]
    batch = MessageBatch.from_reply(stored_parts(b"".join(parts), [0, 1, 2], [0, 1, 2], sizes))
    assert batch[:2].body_heads(8) == b"plain-01inflated"
    with pytest.raises(ReplyError, match="body 2 has 1 bytes"):
        batch.body_heads(8)


@pytest.mark.parametrize(("begin", "sizes", "reason"), [
    (-1, [8], "leave"), (0, [7], "leave"), (0, [16, 8], "leave"), (1, [16], "leave"),
    (0, [2**63 - 1, 2**63 - 1], "leave"), (0, [-8], "leave")])
def test_the_kernels_refuse_sizes_that_leave_the_reply(begin: int, sizes: list[int], reason: str) -> None:
    column = struct.pack(f"<{len(sizes)}q", *sizes)
    with pytest.raises(ValueError, match=reason):
        _native.packed_bodies(b"\0" * 16, begin, column)
    with pytest.raises(ValueError, match=reason):
        _native.packed_body_heads(b"\0" * 16, begin, column, 4)
    with pytest.raises(ValueError, match="whole int64s"):
        _native.packed_bodies(b"\0" * 16, 0, b"\0" * 7)
    with pytest.raises(ValueError, match="no heads"):
        _native.packed_body_heads(b"", 0, b"", -1)


def test_packed_extent_sums_and_finds_the_first_short_record() -> None:
    assert _native.packed_extent(struct.pack("<4q", 8, 20, 3, 2)) == (33, 2)
    assert _native.packed_extent(b"") == (0, -1)
    with pytest.raises(ValueError, match="passes int64"):
        _native.packed_extent(struct.pack("<2q", 2**63 - 1, 1))


def test_a_record_ending_before_its_body_length_is_too_short_whatever_follows_it() -> None:
    """Every field is read from the record's own bytes (record.h's mq_record_body): a record of 50 bytes
    has no BODYLENGTH, even with the reply's next record where it would lie; the kernel once read it
    there and refused the body as lying outside its record."""
    host = Host("10.0.0.1", 1)
    whole = bytes(encode_record(topic="T", body=b"x" * 100, properties={}, born_host=host, store_host=host))
    short = struct.pack(">i", 50) + whole[4:50]
    data = short + whole
    with pytest.raises(ReplyError, match="a record too short for its header"):
        oracle.bodies(data, [0, 50], [50, len(whole)])
    with pytest.raises(ValueError, match="a record too short for its header"):
        _native.packed_bodies(data, 0, array("q", [50, len(whole)]))
