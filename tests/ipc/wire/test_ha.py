"""The replication wire: layouts stated field by field, streams in any split, bounds."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine.ha.epochs import EpochEntry
from mqstore.ipc.wire.ha import (
    MAX_BODY_SIZE,
    MAX_EPOCH_ENTRIES,
    HaWireError,
    MasterHandshake,
    MasterStream,
    SlaveHandshake,
    SlaveReport,
    SlaveStream,
    Transfer,
)

# -- layouts, as AutoSwitchHAClient / AutoSwitchHAConnection put the fields ---------------------------


def test_slave_handshake_layout() -> None:
    # int state HANDSHAKE(1), short isSyncFromLastFile, short isAsyncLearner, long brokerId
    assert SlaveHandshake(7, True, False).encode() == struct.pack(">ihhq", 1, 1, 0, 7)
    assert SlaveHandshake(2, False, True).encode() == struct.pack(">ihhq", 1, 0, 1, 2)
    assert len(SlaveHandshake(1).encode()) == 16


def test_slave_report_layout() -> None:
    # int state TRANSFER(2), long maxOffset
    assert SlaveReport(123456789012).encode() == struct.pack(">iq", 2, 123456789012)
    assert len(SlaveReport(0).encode()) == 12


def test_master_handshake_layout() -> None:
    # int state, int bodySize, long maxPhyOffset, int lastEpoch; then int epoch, long startOffset each
    hs = MasterHandshake(9000, 3, (EpochEntry(1, 0), EpochEntry(3, 4096)))
    expected = struct.pack(">iiqi", 1, 24, 9000, 3) + struct.pack(">iq", 1, 0) + struct.pack(">iq", 3, 4096)
    assert hs.encode() == expected
    assert MasterHandshake.decode(expected) == hs


def test_transfer_layout() -> None:
    # int state, int bodySize, long offset, int epoch, long epochStartOffset, long confirmOffset, body
    t = Transfer(1 << 33, 5, 1 << 32, 1000, b"abc")
    expected = struct.pack(">iiqiqq", 2, 3, 1 << 33, 5, 1 << 32, 1000) + b"abc"
    assert t.encode() == expected
    assert len(t.header()) == 36
    assert Transfer.decode(expected) == t
    assert Transfer.decode(struct.pack(">iiqiqq", 2, 0, 10, 1, 0, 10)).is_heartbeat


def test_slave_decode_from_hand_packed_bytes() -> None:
    assert SlaveHandshake.decode(struct.pack(">ihhq", 1, 0, 1, 3)) == SlaveHandshake(3, False, True)
    assert SlaveReport.decode(struct.pack(">iq", 2, 77)) == SlaveReport(77)


# -- streams ------------------------------------------------------------------------------------------

entries_st = st.lists(st.builds(EpochEntry, st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=5)
offsets = st.integers(0, 2**63 - 1)
master_frames = st.lists(st.one_of(
    st.builds(MasterHandshake, offsets, st.integers(0, 2**31 - 1), entries_st.map(tuple)),
    st.builds(Transfer, offsets, st.integers(0, 2**31 - 1), offsets, offsets, st.binary(max_size=300)),
), max_size=8)
slave_frames = st.lists(st.one_of(
    st.builds(SlaveHandshake, offsets, st.booleans(), st.booleans()),
    st.builds(SlaveReport, offsets),
), max_size=10)


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    pieces, last = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[last:p])
        last = p
    return pieces


@given(master_frames, st.lists(st.integers(0, 4000), max_size=20))
def test_master_stream_any_split_gives_the_same_frames(frames: list[MasterHandshake | Transfer],
                                                       cuts: list[int]) -> None:
    data = b"".join(f.encode() for f in frames)
    stream = MasterStream()
    got = [frame for piece in _splits(data, cuts) for frame in stream.feed(piece)]
    assert got == frames
    assert stream.pending_bytes == 0


@given(slave_frames, st.lists(st.integers(0, 200), max_size=20))
def test_slave_stream_any_split_gives_the_same_frames(frames: list[SlaveHandshake | SlaveReport],
                                                      cuts: list[int]) -> None:
    data = b"".join(f.encode() for f in frames)
    stream = SlaveStream()
    got = [frame for piece in _splits(data, cuts) for frame in stream.feed(piece)]
    assert got == frames


def test_byte_by_byte_holds_a_partial_frame() -> None:
    data = Transfer(0, 1, 0, 0, b"x" * 10).encode()
    stream = MasterStream()
    for b in data[:-1]:
        assert stream.feed(bytes((b,))) == []
    assert stream.feed(data[-1:]) == [Transfer(0, 1, 0, 0, b"x" * 10)]


@settings(max_examples=300)
@given(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=5))
def test_any_bytes_give_frames_or_ha_wire_error(data: bytes, cuts: list[int]) -> None:
    """Whatever comes off the socket: frames, nothing yet, or HaWireError; never another exception."""
    for stream in (MasterStream(), SlaveStream()):
        try:
            for piece in _splits(data, cuts):
                stream.feed(piece)
        except HaWireError:
            pass


@given(master_frames.filter(bool), st.data())
def test_a_corrupted_master_stream_raises_only_ha_wire_error(frames: list[MasterHandshake | Transfer],
                                                              data: st.DataObject) -> None:
    raw = bytearray(b"".join(f.encode() for f in frames))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    with contextlib.suppress(HaWireError):
        MasterStream().feed(bytes(raw))


@pytest.mark.parametrize(("frame", "reason"), [
    (struct.pack(">iiqiqq", 2, MAX_BODY_SIZE + 1, 0, 1, 0, 0), "body"),
    (struct.pack(">iiqiqq", 2, -1, 0, 1, 0, 0), "body"),
    (struct.pack(">iiqiqq", 2, 0, -1, 1, 0, 0), "negative offset"),
    (struct.pack(">iiqiqq", 2, 0, 0, -1, 0, 0), "negative epoch"),
    (struct.pack(">iiqiqq", 2, 0, 0, 1, -5, 0), "negative epoch start"),
    (struct.pack(">iiqiqq", 2, 0, 0, 1, 0, -1), "negative confirm offset"),
    (struct.pack(">iiqi", 1, 12 * (MAX_EPOCH_ENTRIES + 1), 0, 1), "entries"),
    (struct.pack(">iiqi", 1, 13, 0, 1), "whole"),
    (struct.pack(">iiqi", 1, 12, 0, 1) + struct.pack(">iq", 1, -3), "negative epoch start"),
    (struct.pack(">iiqi", 1, 0, -2, 1), "negative max offset"),
    (struct.pack(">iiqi", 3, 0, 0, 1), "state 3"),
    (struct.pack(">iiqi", 0, 0, 0, 1), "state 0"),
    (struct.pack(">iiqi", 99, 0, 0, 1), "state 99"),
])
def test_master_stream_bounds(frame: bytes, reason: str) -> None:
    stream = MasterStream()
    with pytest.raises(HaWireError, match=reason):
        stream.feed(frame)
    with pytest.raises(HaWireError):  # and stays failed: nothing after a bad frame can be framed
        stream.feed(Transfer(0, 1, 0, 0).encode())


def test_an_oversized_body_is_refused_from_its_header() -> None:
    """A peer announcing a huge body is refused before any of it is buffered."""
    with pytest.raises(HaWireError):
        MasterStream().feed(struct.pack(">ii", 2, 1 << 30))


@pytest.mark.parametrize(("frame", "reason"), [
    (struct.pack(">ihhq", 1, 2, 0, 1), "sync_from_last_file"),
    (struct.pack(">ihhq", 1, 0, -1, 1), "async_learner"),
    (struct.pack(">ihhq", 1, 0, 0, -1), "negative broker id"),
    (struct.pack(">iq", 2, -1), "negative max offset"),
    (struct.pack(">iq", 4, 0), "state 4"),
])
def test_slave_stream_bounds(frame: bytes, reason: str) -> None:
    with pytest.raises(HaWireError, match=reason):
        SlaveStream().feed(frame)


def test_encoders_refuse_what_the_decoder_would() -> None:
    with pytest.raises(HaWireError):
        Transfer(-1, 1, 0, 0).encode()
    with pytest.raises(HaWireError):
        Transfer(0, 1, 0, 0, bytes(MAX_BODY_SIZE + 1)).encode()
    with pytest.raises(HaWireError):
        SlaveReport(-1).encode()


def test_exact_size_decoders_refuse_other_sizes() -> None:
    with pytest.raises(HaWireError):
        SlaveReport.decode(b"\0\0\0\2")
    with pytest.raises(HaWireError):
        Transfer.decode(struct.pack(">iiqiqq", 2, 3, 0, 1, 0, 0) + b"ab")
    with pytest.raises(HaWireError):
        MasterHandshake.decode(struct.pack(">iiqi", 1, 12, 0, 1))
