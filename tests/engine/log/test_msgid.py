from __future__ import annotations

import ipaddress
import os
import struct
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.engine import _native
from mqstore.engine.log.host import Host
from mqstore.engine.log.msgid import (
    MessageIdError,
    UniqKeyGenerator,
    choose_ipv4,
    decode_offset_msg_id,
    decode_uniq_key,
    fake_ip,
    offset_msg_id,
    offset_msg_ids,
    uniq_key_pid,
    uniq_key_time_ms,
)
from tests.oracle import msgid as msgid_oracle


def utc_ms(year: int, month: int, day: int, hour: int, minute: int, second: int, ms: int) -> int:
    """Epoch ms of a UTC wall time."""
    return int(datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()) * 1000 + ms


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


# --- offsetMsgId ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "phys_offset", "msg_id"),
    [
        # The reference's example (§8.1).
        (Host("10.0.0.1", 10911), 0, "0A00000100002A9F0000000000000000"),
        (Host("192.168.1.100", 10911), 1 << 30, "C0A8016400002A9F0000000040000000"),
        # By hand: 2001:0db8:0000:...:0001, port 0x2A9F, offset 0x123456789.
        (
            Host("2001:db8::1", 10911),
            0x123456789,
            "20010DB800000000000000000000000100002A9F0000000123456789",
        ),
    ],
)
def test_offset_msg_id_vectors(host: Host, phys_offset: int, msg_id: str) -> None:
    assert offset_msg_id(host, phys_offset) == msg_id
    assert decode_offset_msg_id(msg_id) == (host, phys_offset)
    assert decode_offset_msg_id(msg_id.lower()) == (host, phys_offset)


HOSTS = st.builds(
    lambda ip, port: Host(str(ip), port),
    st.ip_addresses(),
    st.integers(-(1 << 31), (1 << 31) - 1),
)


@given(host=HOSTS, phys_offset=st.integers(-(1 << 63), (1 << 63) - 1))
def test_offset_msg_id_round_trip(host: Host, phys_offset: int) -> None:
    msg_id = offset_msg_id(host, phys_offset)
    assert len(msg_id) == (56 if host.is_v6 else 32)
    assert msg_id == msg_id.upper()
    assert decode_offset_msg_id(msg_id) == (host, phys_offset)


@pytest.mark.parametrize(
    "msg_id",
    [
        "",
        "0A00000100002A9F000000000000000",  # 31
        "0A00000100002A9F00000000000000000",  # 33
        "0A00000100002A9F0000000000000000" + "00",  # 34
        "0A00000100002A9F000000000000000G",
        "0A00000100002A9F00000000 0000000",
        "0x000000100002A9F0000000000000000",
        "0A00000100002A9F00000000000000\u0660\u0660",  # Unicode digits are not hex
    ],
)
def test_bad_offset_msg_ids_raise(msg_id: str) -> None:
    with pytest.raises(MessageIdError):
        decode_offset_msg_id(msg_id)
    with pytest.raises(ValueError):  # MessageIdError is a ValueError
        decode_offset_msg_id(msg_id)


def test_offset_msg_id_out_of_range_offset() -> None:
    with pytest.raises(MessageIdError):
        offset_msg_id(Host("10.0.0.1", 10911), 1 << 63)


# --- UNIQ_KEY -------------------------------------------------------------------------------

IP = bytes([192, 168, 1, 10])


def test_uniq_key_fixed_vector() -> None:
    clock = FakeClock(utc_ms(2024, 3, 1, 0, 0, 1, 234))
    gen = UniqKeyGenerator(IP, 40000, -1, clock, tz=UTC)
    #                ip        pid   hash      span(1234) counter
    assert gen.next() == "C0A8010A9C40FFFFFFFF000004D20000"
    assert gen.next() == "C0A8010A9C40FFFFFFFF000004D20001"


def test_uniq_key_layout_field_by_field() -> None:
    clock = FakeClock(utc_ms(2024, 3, 15, 12, 30, 0, 7))
    gen = UniqKeyGenerator(IP, 0x12345, 0x18B4AAC2, clock, tz=UTC)
    gen.next()
    uniq_key = gen.next()
    assert len(uniq_key) == 32
    assert uniq_key == uniq_key.upper()
    raw = bytes.fromhex(uniq_key)
    assert raw[0:4] == IP
    assert raw[4:6] == b"\x23\x45"  # pid cut to its low 16 bits
    assert struct.unpack(">i", raw[6:10])[0] == 0x18B4AAC2
    span_ms = ((14 * 24 + 12) * 3600 + 30 * 60) * 1000 + 7
    assert struct.unpack(">I", raw[10:14])[0] == span_ms
    assert struct.unpack(">H", raw[14:16])[0] == 1
    fields = decode_uniq_key(uniq_key)
    assert (fields.ip, fields.pid, fields.class_loader_hash, fields.month_span_ms, fields.counter) == (
        IP,
        0x2345,
        0x18B4AAC2,
        span_ms,
        1,
    )
    assert uniq_key_pid(uniq_key) == 0x2345


def test_pid_is_a_java_short_cast() -> None:
    clock = FakeClock(utc_ms(2024, 3, 1, 0, 0, 0, 0))
    for pid, hex_pid in [
        (1, "0001"),
        (32767, "7FFF"),
        (32768, "8000"),
        (65535, "FFFF"),
        (65536, "0000"),
        (4_194_304 + 7, "0007"),
        (-1, "FFFF"),
    ]:
        uniq_key = UniqKeyGenerator(IP, pid, 0, clock, tz=UTC).next()
        assert uniq_key[8:12] == hex_pid
        assert uniq_key_pid(uniq_key) == int(hex_pid, 16)


def test_decode_an_id_made_by_a_java_client() -> None:
    # 127.0.0.1, pid 11136, the app class loader hash seen in many real ids, counter 1.
    fields = decode_uniq_key("7F0000012B8018B4AAC28ECA39FC0001")
    assert fields.ip == bytes([127, 0, 0, 1])
    assert fields.pid == 0x2B80
    assert fields.class_loader_hash == 0x18B4AAC2
    assert fields.month_span_ms == 0x8ECA39FC
    assert fields.counter == 1


def test_counter_wraps_at_65536() -> None:
    gen = UniqKeyGenerator(IP, 1, 2, FakeClock(utc_ms(2024, 3, 1, 0, 0, 0, 0)), tz=UTC)
    ids = [gen.next() for _ in range(65537)]
    assert ids[0].endswith("0000")
    assert ids[65535].endswith("FFFF")
    assert ids[65536] == ids[0]


@given(phys_offsets=st.lists(st.integers(0, (1 << 63) - 1), max_size=20),
       host=st.sampled_from([Host("10.0.0.7", 10911), Host("fe80::1", 256)]))
def test_offset_msg_ids_are_offset_msg_id_of_each(phys_offsets: list[int], host: Host) -> None:
    assert offset_msg_ids(host, phys_offsets) == [offset_msg_id(host, p) for p in phys_offsets]


def test_next_many_gives_the_ids_next_gives_within_one_clock_reading() -> None:
    clock_ms = utc_ms(2024, 3, 1, 0, 0, 0, 0)
    one_by_one = UniqKeyGenerator(IP, 1, 2, FakeClock(clock_ms), tz=UTC)
    batched = UniqKeyGenerator(IP, 1, 2, FakeClock(clock_ms), tz=UTC)
    expected = [one_by_one.next() for _ in range(65540)]
    assert batched.next_many(3) + batched.next_many(65530) + batched.next_many(0) + batched.next_many(7) == expected
    assert batched.next() == one_by_one.next()


def test_month_roll() -> None:
    clock = FakeClock(utc_ms(2024, 1, 31, 23, 59, 59, 999))
    gen = UniqKeyGenerator(IP, 1, 2, clock, tz=UTC)
    last_of_january = gen.next()
    # Past day ~24.8 the Java int wraps negative; the bytes read back unsigned are the true span.
    span_ms = 31 * 86_400_000 - 1
    assert span_ms > (1 << 31)
    assert decode_uniq_key(last_of_january).month_span_ms == span_ms
    clock.now_ms = utc_ms(2024, 2, 1, 0, 0, 0, 5)
    first_of_february = gen.next()
    assert decode_uniq_key(first_of_february).month_span_ms == 5
    assert decode_uniq_key(first_of_february).counter == 1
    # December to January crosses the year.
    clock.now_ms = utc_ms(2024, 12, 31, 0, 0, 0, 0)
    gen.next()
    clock.now_ms = utc_ms(2025, 1, 1, 0, 0, 0, 1)
    assert decode_uniq_key(gen.next()).month_span_ms == 1


def test_clock_stepped_back_clamps_small_negative_spans_only() -> None:
    month_start_ms = utc_ms(2024, 3, 1, 0, 0, 0, 0)
    clock = FakeClock(month_start_ms + 10_000)
    gen = UniqKeyGenerator(IP, 1, 2, clock, tz=UTC)
    gen.next()
    clock.now_ms = month_start_ms - 500
    assert decode_uniq_key(gen.next()).month_span_ms == 0
    clock.now_ms = month_start_ms - 999_999
    assert decode_uniq_key(gen.next()).month_span_ms == 0
    clock.now_ms = month_start_ms - 1_000_000
    assert decode_uniq_key(gen.next()).month_span_ms == (1 << 32) - 1_000_000
    clock.now_ms = month_start_ms - 2_000_000
    assert decode_uniq_key(gen.next()).month_span_ms == (1 << 32) - 2_000_000


def test_nearly_time_from_id() -> None:
    created_ms = utc_ms(2024, 3, 15, 8, 0, 0, 42)
    uniq_key = UniqKeyGenerator(IP, 1, 2, FakeClock(created_ms), tz=UTC).next()
    # Read later the same month: this month.
    assert uniq_key_time_ms(uniq_key, utc_ms(2024, 3, 20, 0, 0, 0, 0), tz=UTC) == created_ms
    # Read next month, before the same offset into it came round: last month.
    assert uniq_key_time_ms(uniq_key, utc_ms(2024, 4, 2, 0, 0, 0, 0), tz=UTC) == created_ms
    # Across a year, and for a span past the signed-int wrap.
    created_ms = utc_ms(2024, 12, 31, 23, 0, 0, 0)
    uniq_key = UniqKeyGenerator(IP, 1, 2, FakeClock(created_ms), tz=UTC).next()
    assert uniq_key_time_ms(uniq_key, utc_ms(2025, 1, 1, 1, 0, 0, 0), tz=UTC) == created_ms


def test_ipv6_uniq_key() -> None:
    ip = ipaddress.IPv6Address("2001:db8::7").packed
    uniq_key = UniqKeyGenerator(ip, 1234, 5, FakeClock(utc_ms(2024, 3, 1, 0, 0, 0, 9)), tz=UTC).next()
    assert uniq_key == "20010DB800000000000000000000000704D200000005000000090000"
    fields = decode_uniq_key(uniq_key.lower())
    assert (fields.ip, fields.pid, fields.month_span_ms) == (ip, 1234, 9)


@pytest.fixture
def shanghai_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # A POSIX TZ string needs no tz database: UTC+8, no DST.
    monkeypatch.setenv("TZ", "CST-8")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("shanghai_local_time")
def test_month_start_is_local_time_by_default() -> None:
    # 2024-03-01 00:00:01.234 in UTC+8 is still February in UTC.
    now_ms = utc_ms(2024, 2, 29, 16, 0, 1, 234)
    local = UniqKeyGenerator(IP, 1, 2, FakeClock(now_ms)).next()
    assert decode_uniq_key(local).month_span_ms == 1234
    explicit = UniqKeyGenerator(IP, 1, 2, FakeClock(now_ms), tz=timezone(timedelta(hours=8))).next()
    assert explicit == local
    in_utc = UniqKeyGenerator(IP, 1, 2, FakeClock(now_ms), tz=UTC).next()
    assert decode_uniq_key(in_utc).month_span_ms == (28 * 24 + 16) * 3_600_000 + 1234
    assert uniq_key_time_ms(local, now_ms + 60_000) == now_ms


def test_generator_rejects_bad_ip_length() -> None:
    with pytest.raises(ValueError):
        UniqKeyGenerator(b"\x01\x02\x03", 1, 2, FakeClock(0))


@pytest.mark.parametrize(
    "uniq_key", ["", "7F0000012B8018B4AAC28ECA39FC00", "7F0000012B8018B4AAC28ECA39FC000Z"]
)
def test_bad_uniq_keys_raise(uniq_key: str) -> None:
    with pytest.raises(MessageIdError):
        decode_uniq_key(uniq_key)
    with pytest.raises(MessageIdError):
        uniq_key_pid(uniq_key)
    with pytest.raises(MessageIdError):
        uniq_key_time_ms(uniq_key, 0)


def test_fake_ip_is_bytes_4_to_7_of_the_time() -> None:
    assert fake_ip(0x0000018BCFE56800) == bytes.fromhex("CFE56800")


def test_choose_ipv4_prefers_public_then_first_private() -> None:
    def packed(*ips: str) -> list[bytes]:
        return [ipaddress.IPv4Address(ip).packed for ip in ips]

    assert choose_ipv4(packed("127.0.0.1", "169.254.1.1", "10.0.0.5", "8.8.8.8")) == packed("8.8.8.8")[0]
    assert choose_ipv4(packed("127.0.0.1", "10.0.0.5", "192.168.0.2")) == packed("10.0.0.5")[0]
    assert choose_ipv4(packed("127.0.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1")) is None
    assert choose_ipv4([b"\x00" * 16]) is None


def test_for_this_process() -> None:
    clock = FakeClock(utc_ms(2024, 3, 1, 0, 0, 0, 0))
    uniq_key = UniqKeyGenerator.for_this_process(clock).next()
    fields = decode_uniq_key(uniq_key)
    assert len(uniq_key) == 32
    assert fields.ip == fake_ip(clock.now_ms)
    assert fields.pid == os.getpid() & 0xFFFF
    assert fields.counter == 0


@settings(max_examples=300, deadline=None)
@given(st.text("0123456789ABCDEF", min_size=28, max_size=28) | st.text("0123456789ABCDEF", min_size=52, max_size=52),
       st.integers(0, 0xFFFF), st.integers(0, 600))
def test_the_uniq_key_kernel_spells_the_ids_the_oracle_spells(head: str, counter: int, count: int) -> None:
    assert _native.uniq_keys(head, counter, count) == msgid_oracle.uniq_keys(head, counter, count)


def test_the_uniq_key_kernel_refuses_what_is_not_a_head_a_count_or_a_16_bit_counter() -> None:
    for head, counter, count in (("é" * 28, 0, 1), ("A" * 28, 0, -1), ("A" * 28, 1 << 16, 1), ("A" * 28, -1, 1)):
        with pytest.raises(ValueError):
            _native.uniq_keys(head, counter, count)
